package wire

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/internal/jsontext"
)

// reflectInput is the input message as encoding/json writes abi.Input
// (protocol.MarshalJSON): what EncodeInput must write, byte for byte.
func reflectInput(in *protocol.HandlerInput) ([]byte, error) {
	artifact := func(a *protocol.Artifact) abi.Artifact {
		return abi.Artifact{ArtifactID: a.ArtifactID, AgentCreated: a.AgentCreated, FileName: a.FileName,
			RelativePath: a.RelativePath, WorkspacePath: a.WorkspacePath(), URI: a.URI, StepID: a.StepID}
	}
	msg := abi.Input{ABI: abi.Version, Handler: string(in.Handler), Task: abi.Task{TaskID: in.Task.TaskID,
		Input: in.Task.Input, AdditionalInput: in.Task.AdditionalInput, Artifacts: []abi.Artifact{}}}
	for i := range in.Task.Artifacts {
		msg.Task.Artifacts = append(msg.Task.Artifacts, artifact(&in.Task.Artifacts[i]))
	}
	if s := in.Step; s != nil {
		msg.Step = &abi.Step{StepID: s.StepID, Name: s.Name, Input: s.Input, AdditionalInput: s.AdditionalInput, Planned: s.Planned}
	}
	if r := in.Request; r != nil {
		msg.Request = &abi.Request{Input: r.Input, AdditionalInput: r.AdditionalInput}
	}
	if in.Artifact != nil {
		a := artifact(in.Artifact)
		msg.Artifact = &a
	}
	return protocol.MarshalJSON(msg)
}

var inputObjects = []json.RawMessage{nil, {}, json.RawMessage(`{}`), json.RawMessage(" { \"a\" : [ 1 , \"<\\n>\" ] } ")}

func randomArtifact(r *rand.Rand) protocol.Artifact {
	a := protocol.Artifact{ArtifactID: jsontext.String(r), AgentCreated: r.IntN(2) == 0, FileName: jsontext.String(r),
		RelativePath: jsontext.String(r), StepID: jsontext.String(r)}
	if r.IntN(3) == 0 {
		a.URI = jsontext.String(r)
	}
	return a
}

// The handler's input is written without encoding/json's reflection, and
// must be its text exactly: for random inputs of every handler (strings
// of every kind of byte, null and absent fields, objects compact or not,
// artifacts of bytes and URIs), EncodeInput writes what encoding/json
// writes for abi.Input.
func TestEncodeInputIsEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		in := &protocol.HandlerInput{Handler: protocol.Handler(jsontext.String(r)),
			Task: &protocol.Task{TaskID: jsontext.String(r), Input: jsontext.StringOrNil(r), AdditionalInput: inputObjects[r.IntN(len(inputObjects))]}}
		for range r.IntN(3) {
			in.Task.Artifacts = append(in.Task.Artifacts, randomArtifact(r))
		}
		if r.IntN(2) == 0 {
			in.Step = &protocol.Step{StepID: jsontext.String(r), Name: jsontext.StringOrNil(r), Input: jsontext.StringOrNil(r),
				AdditionalInput: inputObjects[r.IntN(len(inputObjects))], Planned: r.IntN(2) == 0}
			in.Request = &protocol.StepRequestBody{Input: jsontext.StringOrNil(r), AdditionalInput: inputObjects[r.IntN(len(inputObjects))]}
		}
		if r.IntN(3) == 0 {
			a := randomArtifact(r)
			in.Artifact = &a
		}
		want, err := reflectInput(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := V1.EncodeInput(in); string(got) != string(want) {
			t.Fatalf("input %d:\nEncodeInput   %s\nencoding/json %s", i, got, want)
		}
	}
}
