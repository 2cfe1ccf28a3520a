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
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// V1 is the wire format of ABI version 1.
var V1 protocol.Codec = v1{}

type v1 struct{}

// EncodeInput writes abi.Input.
func (v1) EncodeInput(in *protocol.HandlerInput) []byte {
	msg := abi.Input{ABI: abi.Version, Handler: string(in.Handler), Task: taskView(in.Task)}
	if s := in.Step; s != nil {
		msg.Step = &abi.Step{
			StepID:          s.StepID,
			Name:            s.Name,
			Input:           s.Input,
			AdditionalInput: s.AdditionalInput,
			Planned:         s.Planned,
		}
	}
	if r := in.Request; r != nil {
		msg.Request = &abi.Request{Input: r.Input, AdditionalInput: r.AdditionalInput}
	}
	if in.Artifact != nil {
		a := artifactView(in.Artifact)
		msg.Artifact = &a
	}
	b, err := marshal(msg)
	if err != nil {
		// Every field is a string, a number, a bool or a JSON object the
		// domain has checked.
		panic(fmt.Sprintf("encode handler input: %v", err))
	}
	return b
}

// marshal is protocol.MarshalJSON: no HTML escaping, so a message takes
// at most twice its text.
var marshal = protocol.MarshalJSON

func taskView(t *protocol.Task) abi.Task {
	v := abi.Task{TaskID: t.TaskID, Input: t.Input, AdditionalInput: t.AdditionalInput, Artifacts: []abi.Artifact{}}
	for i := range t.Artifacts {
		v.Artifacts = append(v.Artifacts, artifactView(&t.Artifacts[i]))
	}
	return v
}

func artifactView(a *protocol.Artifact) abi.Artifact {
	return abi.Artifact{
		ArtifactID:    a.ArtifactID,
		AgentCreated:  a.AgentCreated,
		FileName:      a.FileName,
		RelativePath:  a.RelativePath,
		WorkspacePath: a.WorkspacePath(),
		URI:           a.URI,
		StepID:        a.StepID,
	}
}

// DecodeStepResult reads abi.StepResult.
func (v1) DecodeStepResult(b []byte) (*protocol.StepResult, error) {
	var r abi.StepResult
	if err := decodeObject(b, &r); err != nil {
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
	if err := decodeObject(b, &r); err != nil {
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
	if err := decodeObject(b, &r); err != nil {
		return nil, err
	}
	return &protocol.DownloadResult{Default: r.Default, Error: r.Error}, nil
}

// decodeObject reads a result object into v.
func decodeObject(b []byte, v any) error {
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return errors.New("it is not a JSON object")
	}
	return json.Unmarshal(b, v)
}

// DecodeTaskResult reads abi.TaskResult, refusing more than max planned
// steps before decoding them: a result of 1 MiB can list 350,000 empty
// steps, and each costs the host far more than its bytes.
func (v1) DecodeTaskResult(b []byte, max int) (*protocol.TaskResult, error) {
	res := &protocol.TaskResult{}
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
		// Keys match as encoding/json matches them, ignoring case, so
		// that every handler's result reads the same way.
		switch {
		case strings.EqualFold(key, "steps"):
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
		case strings.EqualFold(key, "error"):
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
