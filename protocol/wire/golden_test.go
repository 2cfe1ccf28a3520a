package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// The host's side of the ABI's golden messages (plugins/abi/testdata/golden,
// read by the Go and Rust kits' tests too).

const goldenDir = "../../plugins/abi/testdata/golden"

// notFromTheHost are the golden inputs the host does not write, and why.
var notFromTheHost = map[string]string{
	"input/artifact-future-fields.json": "it holds fields of a later host, and an artifact without workspace_path",
}

// TestEncodeInputWritesTheGoldenInputs: for the domain values of each
// golden input, the host writes a message with the golden's JSON meaning.
func TestEncodeInputWritesTheGoldenInputs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(goldenDir, "input", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden inputs in %s (%v)", goldenDir, err)
	}
	for name := range notFromTheHost {
		if _, err := os.Stat(filepath.Join(goldenDir, name)); err != nil {
			t.Errorf("notFromTheHost names %s: %v", name, err)
		}
	}
	for _, p := range paths {
		name := "input/" + filepath.Base(p)
		if notFromTheHost[name] != "" {
			continue
		}
		golden, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var msg abi.Input
		if err := json.Unmarshal(golden, &msg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := V1.EncodeInput(domainInput(&msg))
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: the host writes %s: %v", name, got, err)
		}
		if err := json.Unmarshal(golden, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: the host writes\n%s", name, got)
		}
	}
}

// domainInput is the domain's handler input that an input message
// describes, field by field.
func domainInput(msg *abi.Input) *protocol.HandlerInput {
	artifact := func(a *abi.Artifact) protocol.Artifact {
		return protocol.Artifact{ArtifactID: a.ArtifactID, AgentCreated: a.AgentCreated, FileName: a.FileName, RelativePath: a.RelativePath,
			URI: a.URI, StepID: a.StepID}
	}
	in := &protocol.HandlerInput{
		Handler: protocol.Handler(msg.Handler),
		Task:    &protocol.Task{TaskID: msg.Task.TaskID, Input: msg.Task.Input, AdditionalInput: msg.Task.AdditionalInput, Artifacts: []protocol.Artifact{}},
	}
	for i := range msg.Task.Artifacts {
		in.Task.Artifacts = append(in.Task.Artifacts, artifact(&msg.Task.Artifacts[i]))
	}
	if s := msg.Step; s != nil {
		in.Step = &protocol.Step{TaskID: msg.Task.TaskID, StepID: s.StepID, Name: s.Name, Input: s.Input, AdditionalInput: s.AdditionalInput, Planned: s.Planned}
	}
	if r := msg.Request; r != nil {
		in.Request = &protocol.StepRequestBody{Input: r.Input, AdditionalInput: r.AdditionalInput}
	}
	if a := msg.Artifact; a != nil {
		art := artifact(a)
		in.Artifact = &art
	}
	return in
}

// TestDecodeResultsReadTheGoldenResults: the host reads each golden result
// as encoding/json reads it into the ABI's message.
func TestDecodeResultsReadTheGoldenResults(t *testing.T) {
	for dir, tc := range map[string]struct {
		msg    func() any
		decode func([]byte) (any, error)
	}{
		"step_result":     {func() any { return &abi.StepResult{} }, func(b []byte) (any, error) { return V1.DecodeStepResult(b) }},
		"task_result":     {func() any { return &abi.TaskResult{} }, func(b []byte) (any, error) { return V1.DecodeTaskResult(b, 10) }},
		"artifact_result": {func() any { return &abi.ArtifactResult{} }, func(b []byte) (any, error) { return V1.DecodeArtifactResult(b) }},
		"download_result": {func() any { return &abi.DownloadResult{} }, func(b []byte) (any, error) { return V1.DecodeDownloadResult(b) }},
	} {
		paths, err := filepath.Glob(filepath.Join(goldenDir, dir, "*.json"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no golden messages in %s/%s (%v)", goldenDir, dir, err)
		}
		for _, p := range paths {
			name := dir + "/" + filepath.Base(p)
			golden, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.msg()
			if err := json.Unmarshal(golden, want); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := tc.decode(golden)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if g, w := byName(reflect.ValueOf(got)), byName(reflect.ValueOf(want)); !reflect.DeepEqual(g, w) {
				t.Errorf("%s reads as\n%v\nwant\n%v", name, g, w)
			}
		}
	}
}
