package hostapi

import (
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The JSON messages a plugin hands a host function are read as every
// other reader reads them: I-JSON, and each member by its exact name. A
// "URI" or a second "url" would be taken by Go's decoder (which folds
// case and keeps the last) as something a log line, a policy check
// written in another language or the plugin's own test double would not.
func TestHostFunctionMessagesAreReadByTheirExactMemberNames(t *testing.T) {
	t.Run("artifact_create", func(t *testing.T) {
		h := newFakeHost()
		g := newGuest(t, h, Config{})
		data := g.put(1000, "payload")
		for _, tc := range []struct{ meta, want string }{
			{`{"file_name":"a.txt","FILE_NAME":"../b"}`, `"FILE_NAME": member names are case-sensitive`},
			{`{"File_Name":"a.txt"}`, `"File_Name": member names are case-sensitive`},
			{`{"file_name":"a","URI":"https://x.test/"}`, `"URI": member names are case-sensitive`},
		} {
			g.wantErr(g.call("artifact_create", 0, g.put(0, tc.meta), 1000, data, 0), abi.ErrInvalid, tc.want)
		}
		if len(h.artifacts) != 0 {
			t.Errorf("refused meta created %+v", h.artifacts)
		}
	})
	t.Run("http_request", func(t *testing.T) {
		e := newFakeEgress()
		g := newGuest(t, newFakeHost(), Config{}, WithEgress(e))
		for _, tc := range []struct{ req, want string }{
			{`{"url":"https://api.test/","URL":"https://other.test/"}`, `"URL": member names are case-sensitive`},
			{`{"url":"https://api.test/","url":"https://other.test/"}`, "duplicate member name at url"},
			{`{"url":"https://api.test/","headers":[{"name":"a","value":"b","Value":"c"}]}`, `"Value" in headers[0]: member names are case-sensitive`},
			{`{"url":"https://api.test/","timeout_ms":1e400}`, "number out of range at timeout_ms"},
		} {
			g.wantErr(g.call("http_request", 0, g.put(0, tc.req), 0, 0), abi.ErrInvalid, tc.want)
		}
		if len(e.reqs) != 0 {
			t.Errorf("%d refused requests reached egress: %+v", len(e.reqs), e.reqs)
		}
	})
}
