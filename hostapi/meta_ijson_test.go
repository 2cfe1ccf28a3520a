package hostapi

import (
	"testing"

	"github.com/agentrt/agentrt/plugins/abi"
)

// An artifact's meta is JSON a plugin hands over, and I-JSON like the rest:
// a name twice (file_name once plain, once escaped, say) is refused, not
// read as whichever a decoder keeps, and nothing is created.
func TestArtifactMetaThatIsNotIJSONIsRefused(t *testing.T) {
	h := newFakeHost()
	g := newGuest(t, h, Config{})
	data := g.put(1000, "payload")
	for _, tc := range []struct{ meta, want string }{
		{`{"file_name":"a.txt","file_name":"b.txt"}`, "duplicate member name at file_name"},
		{`{"file_name":"a.txt","file_n\u0061me":"../b"}`, "duplicate member name at file_name"},
		{`{"file_name":"a.txt","size":1e400}`, "number out of range at size"},
		{"{\"file_name\":\"a\xff.txt\"}", "invalid UTF-8"},
	} {
		g.wantErr(g.call("artifact_create", 0, g.put(0, tc.meta), 1000, data, 0), abi.ErrInvalid, tc.want)
	}
	if len(h.artifacts) != 0 {
		t.Errorf("refused meta created %+v", h.artifacts)
	}
}
