package agenttest

import (
	"strings"
	"testing"
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
