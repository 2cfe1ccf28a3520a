package agenttest

import (
	"os"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// A result agentrt refuses (protocol.CheckJSON and the wire format's
// reading of it) fails the call in the harness too; one it takes, the
// harness takes.
func TestTheHarnessTakesTheResultsAgentrtTakesAndNoOther(t *testing.T) {
	type planned struct {
		Name  string `json:"name"`
		Input string `json:"input"`
	}
	type result struct {
		Output           string    `json:"output"`
		AdditionalOutput any       `json:"additional_output"`
		Steps            []planned `json:"steps"`
	}
	deep := strings.Repeat("[", 101) + strings.Repeat("]", 101)
	for _, tc := range []struct{ res, want string }{
		{`{"output":"a","output":"b"}`, `duplicate member name "output"`},
		{`{"additional_output":{"k":1,"k":2}}`, `duplicate member name "k"`},
		{`{"additional_output":{"n":1e400}}`, "number out of range"},
		{`{"additional_output":{"n":-1.8e308}}`, "number out of range"},
		{`{"additional_output":{"n":0.` + strings.Repeat("1", 400) + `}}`, "number too long: 402 bytes"},
		{`{"output":"\ud800"}`, "lone surrogate"},
		{`{"output":"\udc00x"}`, "lone surrogate"},
		{"{\"output\":\"\xff\"}", "invalid UTF-8"},
		{`{"additional_output":` + deep + `}`, "nested deeper than 100 levels"},
		{`{"OUTPUT":"b"}`, `"OUTPUT": member names are case-sensitive; did you mean "output"?`},
		{`{"steps":[{"name":"a"},{"Name":"b"}]}`, `"Name" in steps[1]: member names are case-sensitive`},
	} {
		var r result
		if got := checkResult([]byte(tc.res), &r); !strings.Contains(got, tc.want) {
			t.Errorf("%.60s: %q, want %q", tc.res, got, tc.want)
		}
	}
	for _, ok := range []string{
		`{"output":"a","additional_output":{"n":1.7976931348623157e308,"m":1e-400,"OUTPUT":"free-form"},"steps":[{"name":"a"}]}`,
		`{"output":"\ud83d\ude00 é","unknown":1}`,
	} {
		var r result
		if got := checkResult([]byte(ok), &r); got != "" {
			t.Errorf("%s: %q, want it taken", ok, got)
		}
	}
}

// Every case of plugins/abi/testdata/results, which agentrt's own test
// holds to its reading (protocol/wire), is refused here when agentrt
// refuses it and taken when agentrt takes it; a result that fails as it is
// decoded (a name in another case, not an object) fails in agentrt's
// words.
func TestTheHarnessReadsEverySharedResultCaseAsAgentrtDoes(t *testing.T) {
	data, err := os.ReadFile("../../abi/testdata/results")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			t.Fatalf("a line is handler<TAB>result<TAB>answer: %q", line)
		}
		n++
		handler, result, want := parts[0], parts[1], parts[2]
		var res any
		switch handler {
		case abi.HandlerStep:
			res = &abi.StepResult{}
		case abi.HandlerTask:
			res = &abi.TaskResult{}
		case abi.HandlerArtifact:
			res = &abi.ArtifactResult{}
		case abi.HandlerDownload:
			res = &abi.DownloadResult{}
		default:
			t.Fatalf("handler %q", handler)
		}
		got := readResult([]byte(result), res)
		switch {
		case want == "ok" && got != "":
			t.Errorf("%s result %.80s: %q, agentrt takes it", handler, result, got)
		case want != "ok" && got == "":
			t.Errorf("%s result %.80s: taken, agentrt says %q", handler, result, want)
		case strings.HasPrefix(want, "invalid: ") && got != strings.TrimPrefix(want, "invalid: "):
			t.Errorf("%s result %.80s: %q, agentrt says %q", handler, result, got, want)
		}
	}
	if n < 40 {
		t.Fatalf("%d cases", n)
	}
}
