package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The host's side of the ABI codec: a result message, as a plugin hands it
// to set_result, read for each handler. Whatever the bytes, the host never
// panics, never keeps more planned steps than the limit, and what it
// accepts is text it can store and serve.

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
		f.Add([]byte(s), int32(0))
	}
	f.Fuzz(func(t *testing.T, result []byte, code int32) {
		limits := DefaultLimits
		limits.MaxPlannedSteps = 3
		a := &Agent{limits: limits}

		call := &Call{agent: a}
		if err := call.SetResult(result); err != nil {
			if ErrorCode(err) != EUNPROCESSABLE && ErrorCode(err) != ETOOLARGE {
				t.Fatalf("set_result refused with %v", err)
			}
		} else if !utf8.Valid(result) || !json.Valid(result) {
			t.Fatalf("set_result accepted %q", result)
		}

		var task abi.TaskResult
		if err := call.decodeResult(code, decodeTaskResult(&task, a.maxPlanned()), &task.Error); err == nil || ErrorCode(err) == EPLUGIN {
			if len(task.Steps) > 3 {
				t.Fatalf("%d planned steps kept, over the limit of 3", len(task.Steps))
			}
		}
		checkFailure(t, call, code, &task.Error, decodeTaskResult(&task, 3))
		// Read the same as encoding/json reads it, within the limit.
		var counted, ref abi.TaskResult
		if decodeTaskResult(&counted, 1<<30)(result) == nil && call.resultErr == nil {
			if err := json.Unmarshal(result, &ref); err != nil {
				t.Fatalf("the task result %q is read, encoding/json refuses it: %v", result, err)
			}
			if counted.Error != ref.Error || !reflect.DeepEqual(counted.Steps, ref.Steps) {
				t.Fatalf("the task result %q reads as %+v, encoding/json reads %+v", result, counted, ref)
			}
		}
		if err := call.decodeResult(code, decodeTaskResult(&task, 3), &task.Error); err == nil {
			for _, s := range task.Steps {
				if !utf8.ValidString(s.Name) || (s.Input != nil && !utf8.ValidString(*s.Input)) || !utf8.Valid(s.AdditionalInput) {
					t.Fatalf("a planned step with invalid text: %+v", s)
				}
			}
		}

		var step abi.StepResult
		if err := call.decodeResult(code, decodeInto(&step), &step.Error); err == nil {
			st := &Step{}
			if applyStepResult(st, &step) == nil {
				b, err := json.Marshal(st)
				if err != nil || !utf8.Valid(b) {
					t.Fatalf("a step from an accepted result does not encode: %v %q", err, b)
				}
			}
		}
		var art abi.ArtifactResult
		checkFailure(t, call, code, &art.Error, decodeInto(&art))
	})
}

// checkFailure checks that a failing result's message is cut for the
// client.
func checkFailure(t *testing.T, call *Call, code int32, errMsg *string, decode func([]byte) error) {
	t.Helper()
	err := call.decodeResult(code, decode, errMsg)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("decodeResult returned %T %v, not an *Error", err, err)
	}
	if e != nil {
		e = handlerError("artifact", e)
	}
	if e != nil && len(e.Message) > maxPluginText+100 {
		t.Fatalf("a failure message of %d bytes", len(e.Message))
	}
}

func TestResultDecodingSeeds(t *testing.T) {
	a := &Agent{limits: DefaultLimits}
	a.limits.MaxPlannedSteps = 3
	call := &Call{agent: a}
	if err := call.SetResult([]byte(`{"steps":[{},{},{},{}]}`)); err != nil {
		t.Fatal(err)
	}
	var task abi.TaskResult
	err := call.decodeResult(0, decodeTaskResult(&task, 3), &task.Error)
	if ErrorCode(err) != EPLUGIN || !strings.Contains(ErrorMessage(err), "planned more than 3 steps") {
		t.Errorf("4 steps over a limit of 3: %v", err)
	}
	if err := call.SetResult([]byte(`{"error":"` + strings.Repeat("é", 5000) + `"}`)); err != nil {
		t.Fatal(err)
	}
	err = call.decodeResult(0, decodeTaskResult(&task, 3), &task.Error)
	if msg := ErrorMessage(handlerError("task", err)); len(msg) > maxPluginText+100 || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "more bytes)") {
		t.Errorf("a 10,000-byte failure message reached the client as %d bytes: %.80q…", len(msg), msg)
	}
}

func TestAPluginFailureReachesClientsCut(t *testing.T) {
	// wazero names a trapped start function by all its export names: the
	// plugin chooses them, 200 KB of them on one line.
	long := "the plugin trapped: in start function[3] export[\"" + strings.Repeat("x", 200<<10) + "\"]: wasm error: unreachable"
	for _, code := range []string{EPLUGIN, ETIMEOUT} {
		e := handlerError("step", Errorf(code, "%s", long))
		if len(e.Message) > maxPluginText+64 || !strings.HasSuffix(e.Message, "more bytes)") || e.Code != code {
			t.Errorf("%s: a failure of %d bytes reached the client as %d bytes", code, len(long), len(e.Message))
		}
	}
}

func TestAPlanOverTheLimitIsRefusedBeforeItsStepsAreDecoded(t *testing.T) {
	// 349,521 empty steps: what a 1 MiB result holds.
	result := []byte(`{"steps":[` + strings.Repeat(`{},`, 349520) + `{}]}`)
	var res abi.TaskResult
	decode := decodeTaskResult(&res, 256)
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			res = abi.TaskResult{}
			if err := decode(result); ErrorCode(err) != EPLUGIN {
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
