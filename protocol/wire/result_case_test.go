package wire

import (
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// A result's member names are the ABI's exactly: one that encoding/json
// would read as a field in another case ("OUTPUT" beside "output", which a
// kit's test double, a log or any other reader reads as another name) is
// refused, and the call fails naming it. Names of no field are ignored.
func TestAResultNamingAFieldInAnotherCaseIsRefusedNamingIt(t *testing.T) {
	const rule = `: member names are case-sensitive; did you mean `
	decoders := map[string]func([]byte) error{
		"step":     func(b []byte) error { _, err := V1.DecodeStepResult(b); return err },
		"task":     func(b []byte) error { _, err := V1.DecodeTaskResult(b, 256); return err },
		"artifact": func(b []byte) error { _, err := V1.DecodeArtifactResult(b); return err },
		"download": func(b []byte) error { _, err := V1.DecodeDownloadResult(b); return err },
	}
	for _, tc := range []struct {
		handler, result, want string // want "" for taken
	}{
		{"step", `{"output":"a","OUTPUT":"b"}`, `"OUTPUT"` + rule + `"output"?`},
		{"step", `{"Output":"b"}`, `"Output"` + rule + `"output"?`},
		{"step", `{"output":"a","Additional_Output":{"k":1}}`, `"Additional_Output"` + rule + `"additional_output"?`},
		{"step", `{"NAME":"n"}`, `"NAME"` + rule + `"name"?`},
		{"step", `{"is_last":false,"iſ_laſt":true}`, `"i\u017f_la\u017ft"` + rule + `"is_last"?`},
		{"step", `{"output":"fine","Error":"boom"}`, `"Error"` + rule + `"error"?`},
		{"task", `{"Steps":[{"name":"s"}]}`, `"Steps"` + rule + `"steps"?`},
		{"task", `{"steps":[{"name":"a"},{"NAME":"s"}]}`, `"NAME" in steps[1]` + rule + `"name"?`},
		{"task", `{"steps":[{"name":"a","Input":"i"}]}`, `"Input" in steps[0]` + rule + `"input"?`},
		{"task", `{"steps":[],"ERROR":"x"}`, `"ERROR"` + rule + `"error"?`},
		{"artifact", `{"Reject":"no"}`, `"Reject"` + rule + `"reject"?`},
		{"artifact", `{"replace":{"URI":"https://example.com/a"}}`, `"URI" in replace` + rule + `"uri"?`},
		{"artifact", `{"replace":{"uri":"https://example.com/a","Workspace_Path":"a"}}`, `"Workspace_Path" in replace` + rule + `"workspace_path"?`},
		{"download", `{"DEFAULT":true}`, `"DEFAULT"` + rule + `"default"?`},
		{"download", `{"default":false,"error":"x","\u0045rror":"y"}`, `"Error"` + rule + `"error"?`},
		// Taken: exact names, names of no field, names inside values kept as
		// they are.
		{"step", `{"output":"a","outputs":"b","additional_output":{"OUTPUT":1,"Error":2},"\u006eame":"n"}`, ""},
		{"task", `{"steps":[{"name":"a","additional_input":{"NAME":1}}],"plan":{"Steps":1}}`, ""},
		{"artifact", `{"replace":{"uri":"https://example.com/a"},"rejected":"no"}`, ""},
		{"download", `{"default":true,"defaults":false}`, ""},
	} {
		err := decoders[tc.handler]([]byte(tc.result))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s result %s: %v, want it taken", tc.handler, tc.result, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s result %s: %v\nwant %s", tc.handler, tc.result, err, tc.want)
		case err != nil && protocol.ErrorCode(err) != protocol.EINTERNAL:
			// A plain error: the call fails as for any result that is not
			// valid (protocol's finish: EPLUGIN, cause bad_result).
			t.Errorf("%s result %s: code %s", tc.handler, tc.result, protocol.ErrorCode(err))
		}
	}
}
