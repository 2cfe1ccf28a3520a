package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
)

// The host's side of the wire format: a result message, as a plugin hands
// it to set_result and the domain accepts it (protocol.CheckJSON), read
// for each handler. Whatever the bytes, decoding never panics, never keeps
// more planned steps than the limit, reads what encoding/json reads, and
// what it accepts is text the host can store and serve.

var resultSeeds = []string{
	`{}`,
	`{"output":"hi","additional_output":{"a":[1,{"b":null}]},"name":"n","is_last":true}`,
	`{"steps":[{"name":"a","input":"i","additional_input":{"k":"v"}},{}],"error":""}`,
	`{"steps":null,"error":null}`,
	`{"reject":"no","error":"x"}`,
	`{"steps":[{},{},{},{}]}`,
	`{"steps":[1]}`, `{"steps":{}}`, `{"steps":[{"name":5}]}`, `[]`, `"s"`, `{"output":5}`,
	"{\"output\":\"\xff\"}", `{"output":"\ud800"}`, `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	`{"steps":[{}],"steps":[{},{},{},{},{}]}`, `{"output":"a"} {}`, ``, `{"error":"` + strings.Repeat("e", 5000) + `"}`,
	`{"ERROR":"boom","Steps":[{"Name":"n"}]}`, `{"steps":[{"name":"a"}],"STEPS":null}`,
}

func FuzzResultDecoding(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, result []byte) {
		if protocol.CheckJSON(result, protocol.MaxJSONDepth) != nil {
			return // set_result refuses it: no codec ever sees it
		}
		task, err := V1.DecodeTaskResult(result, 3)
		if err == nil && len(task.Steps) > 3 {
			t.Fatalf("%d planned steps kept, over the limit of 3", len(task.Steps))
		}
		if err != nil && protocol.ErrorCode(err) != protocol.EINTERNAL && protocol.ErrorCode(err) != protocol.EPLUGIN {
			t.Fatalf("decoding failed with code %s: %v", protocol.ErrorCode(err), err)
		}
		if err == nil {
			for _, s := range task.Steps {
				if !utf8.ValidString(s.Name) || (s.Input != nil && !utf8.ValidString(*s.Input)) || !utf8.Valid(s.AdditionalInput) {
					t.Fatalf("a planned step with invalid text: %+v", s)
				}
			}
		}
		// Read the same as encoding/json reads it, within the limit.
		if counted, err := V1.DecodeTaskResult(result, 1<<30); err == nil {
			var ref abi.TaskResult
			if err := json.Unmarshal(result, &ref); err != nil {
				t.Fatalf("the task result %q is read, encoding/json refuses it: %v", result, err)
			}
			want := &protocol.TaskResult{Error: ref.Error}
			for _, s := range ref.Steps {
				want.Steps = append(want.Steps, protocol.PlannedStep{Name: s.Name, Input: s.Input, AdditionalInput: s.AdditionalInput})
			}
			if !reflect.DeepEqual(counted, want) {
				t.Fatalf("the task result %q reads as %+v, encoding/json reads %+v", result, counted, want)
			}
		}
		if step, err := V1.DecodeStepResult(result); err == nil {
			if step.Output != nil && !utf8.ValidString(*step.Output) || step.Name != nil && !utf8.ValidString(*step.Name) || !utf8.ValidString(step.Error) {
				t.Fatalf("a step result with invalid text: %+v", step)
			}
		}
		if art, err := V1.DecodeArtifactResult(result); err == nil && (!utf8.ValidString(art.Reject) || !utf8.ValidString(art.Error)) {
			t.Fatalf("an artifact result with invalid text: %+v", art)
		}
	})
}

func TestAPlanOverTheLimitIsRefusedBeforeItsStepsAreDecoded(t *testing.T) {
	// 349,521 empty steps: what a 1 MiB result holds.
	result := []byte(`{"steps":[` + strings.Repeat(`{},`, 349520) + `{}]}`)
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := V1.DecodeTaskResult(result, 256); protocol.ErrorCode(err) != protocol.EPLUGIN {
				b.Fatalf("decoding: %v", err)
			}
		}
	})
	// Decoding them all would allocate tens of MB (a PlannedStep each, and
	// the slice that holds them); refusing at the 257th, a few KB.
	if perOp := allocs.AllocedBytesPerOp(); perOp > 256<<10 {
		t.Errorf("refusing a plan of 349,521 steps allocated %d KiB", perOp>>10)
	}
}

func TestAPlanAtTheLimitIsKept(t *testing.T) {
	res, err := V1.DecodeTaskResult([]byte(`{"steps":[{"name":"a"},{"name":"b","input":"i","additional_input":{"k":1}}]}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	in := "i"
	want := []protocol.PlannedStep{{Name: "a"}, {Name: "b", Input: &in, AdditionalInput: json.RawMessage(`{"k":1}`)}}
	if !reflect.DeepEqual(res.Steps, want) {
		t.Errorf("steps = %+v, want %+v", res.Steps, want)
	}
	if _, err := V1.DecodeTaskResult([]byte(`{"steps":[{},{},{}]}`), 2); protocol.ErrorCode(err) != protocol.EPLUGIN {
		t.Errorf("3 steps over a limit of 2: %v", err)
	}
}
