// Package wire is the plugin wire format of ABI version 1
// (plugins/ABI.md): how the host writes a handler's input and reads its
// result, as the JSON messages of package abi. The domain (package
// protocol) sees only its own types, through protocol.Codec; a future ABI
// version is another Codec beside this one.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// V1 is the wire format of ABI version 1.
var V1 protocol.Codec = v1{}

type v1 struct{}

// EncodeInput writes abi.Input, field by field as encoding/json writes it
// with HTML escaping off (protocol.MarshalJSON), but without its
// reflection: every call writes one. TestEncodeInputIsEncodingJSONs pins
// the two together.
func (v1) EncodeInput(in *protocol.HandlerInput) []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"abi":`...)
	b = strconv.AppendInt(b, abi.Version, 10)
	b = append(b, `,"handler":`...)
	b = protocol.AppendJSONString(b, string(in.Handler))
	t := in.Task
	b = append(b, `,"task":{"task_id":`...)
	b = protocol.AppendJSONString(b, t.TaskID)
	b = append(b, `,"input":`...)
	b = protocol.AppendJSONStringOrNull(b, t.Input)
	b = appendOptionalJSON(b, `,"additional_input":`, t.AdditionalInput)
	b = append(b, `,"artifacts":[`...)
	for i := range t.Artifacts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendArtifact(b, &t.Artifacts[i])
	}
	b = append(b, "]}"...)
	if s := in.Step; s != nil {
		b = append(b, `,"step":{"step_id":`...)
		b = protocol.AppendJSONString(b, s.StepID)
		b = append(b, `,"name":`...)
		b = protocol.AppendJSONStringOrNull(b, s.Name)
		b = append(b, `,"input":`...)
		b = protocol.AppendJSONStringOrNull(b, s.Input)
		b = appendOptionalJSON(b, `,"additional_input":`, s.AdditionalInput)
		b = append(b, `,"planned":`...)
		b = strconv.AppendBool(b, s.Planned)
		b = append(b, '}')
	}
	if r := in.Request; r != nil {
		b = append(b, `,"request":{"input":`...)
		b = protocol.AppendJSONStringOrNull(b, r.Input)
		b = appendOptionalJSON(b, `,"additional_input":`, r.AdditionalInput)
		b = append(b, '}')
	}
	if in.Artifact != nil {
		b = append(b, `,"artifact":`...)
		b = appendArtifact(b, in.Artifact)
	}
	return append(b, '}')
}

// appendOptionalJSON appends key and raw, a JSON value the domain has
// checked, unless raw is empty (an omitempty field).
func appendOptionalJSON(b []byte, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return b
	}
	b = append(b, key...)
	b, err := protocol.AppendRawJSON(b, raw)
	if err != nil {
		// Every JSON object of the domain's has been checked.
		panic(fmt.Sprintf("encode handler input: %v", err))
	}
	return b
}

// appendArtifact appends abi.Artifact.
func appendArtifact(b []byte, a *protocol.Artifact) []byte {
	b = append(b, `{"artifact_id":`...)
	b = protocol.AppendJSONString(b, a.ArtifactID)
	b = append(b, `,"agent_created":`...)
	b = strconv.AppendBool(b, a.AgentCreated)
	b = append(b, `,"file_name":`...)
	b = protocol.AppendJSONString(b, a.FileName)
	b = append(b, `,"relative_path":`...)
	b = protocol.AppendJSONString(b, a.RelativePath)
	for _, f := range [...]struct{ key, value string }{
		{`,"workspace_path":`, a.WorkspacePath()}, {`,"uri":`, a.URI}, {`,"step_id":`, a.StepID},
	} {
		if f.value != "" {
			b = append(b, f.key...)
			b = protocol.AppendJSONString(b, f.value)
		}
	}
	return append(b, '}')
}

// DecodeStepResult reads abi.StepResult.
func (v1) DecodeStepResult(b []byte) (*protocol.StepResult, error) {
	var r abi.StepResult
	if err := decodeObject(b, &r, stepResultFields); err != nil {
		return nil, err
	}
	return &protocol.StepResult{
		Output:           r.Output,
		AdditionalOutput: r.AdditionalOutput,
		Name:             r.Name,
		IsLast:           r.IsLast,
		Error:            r.Error,
	}, nil
}

// DecodeArtifactResult reads abi.ArtifactResult.
func (v1) DecodeArtifactResult(b []byte) (*protocol.ArtifactResult, error) {
	var r abi.ArtifactResult
	if err := decodeObject(b, &r, artifactResultFields); err != nil {
		return nil, err
	}
	res := &protocol.ArtifactResult{Reject: r.Reject, Error: r.Error}
	if r.Replace != nil {
		res.Replace = &protocol.Replacement{URI: r.Replace.URI, WorkspacePath: r.Replace.WorkspacePath}
	}
	return res, nil
}

// DecodeDownloadResult reads abi.DownloadResult.
func (v1) DecodeDownloadResult(b []byte) (*protocol.DownloadResult, error) {
	var r abi.DownloadResult
	if err := decodeObject(b, &r, downloadResultFields); err != nil {
		return nil, err
	}
	return &protocol.DownloadResult{Default: r.Default, Error: r.Error}, nil
}

// The fields of each result, as encoding/json matches members to them.
var (
	stepResultFields     = protocol.JSONFieldsOf(reflect.TypeFor[abi.StepResult]())
	artifactResultFields = protocol.JSONFieldsOf(reflect.TypeFor[abi.ArtifactResult]())
	downloadResultFields = protocol.JSONFieldsOf(reflect.TypeFor[abi.DownloadResult]())
	taskResultFields     = protocol.JSONFieldsOf(reflect.TypeFor[abi.TaskResult]())
)

// decodeObject reads a result object, JSON text set_result took, into v,
// whose fields are fields. A member named as a field only in another case
// ("OUTPUT") is refused, not read as the field as encoding/json would:
// the ABI's names are case-sensitive, and every other reader of the
// result (a kit's test double, a log) reads it as another name.
func decodeObject(b []byte, v any, fields *protocol.JSONFields) error {
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return errors.New("it is not a JSON object")
	}
	if err := fields.Check(b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// DecodeTaskResult reads abi.TaskResult, refusing more than max planned
// steps before decoding them: a result of 1 MiB can list 350,000 empty
// steps, and each costs the host far more than its bytes.
func (v1) DecodeTaskResult(b []byte, max int) (*protocol.TaskResult, error) {
	res := &protocol.TaskResult{}
	// Names as decodeObject takes them; past this, each is a field's
	// exactly or none. The check reads the whole result but allocates
	// nothing, a planned step's names included.
	if err := taskResultFields.Check(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("it is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		switch key {
		case "steps":
			res.Steps = nil
			if tok, err = dec.Token(); err != nil {
				return nil, err
			} else if tok == nil {
				continue // null
			} else if tok != json.Delim('[') {
				return nil, errors.New(`"steps" is not an array`)
			}
			for dec.More() {
				if len(res.Steps) == max {
					return nil, protocol.Errorf(protocol.EPLUGIN, "it planned more than %d steps, the most a task may have planned", max)
				}
				var ps abi.PlannedStep
				if err := dec.Decode(&ps); err != nil {
					return nil, err
				}
				res.Steps = append(res.Steps, protocol.PlannedStep{Name: ps.Name, Input: ps.Input, AdditionalInput: ps.AdditionalInput})
			}
			if _, err := dec.Token(); err != nil { // ]
				return nil, err
			}
		case "error":
			var msg *string
			if err := dec.Decode(&msg); err != nil {
				return nil, err
			}
			res.Error = ""
			if msg != nil {
				res.Error = *msg
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, err
	}
	return res, nil
}
