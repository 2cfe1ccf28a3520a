package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// maxArtifactViewBytes is what docs/SECURITY.md says one artifact of a
// task adds to every handler input: its id and names (a file name, its
// directory and, for bytes, their join, each within the domain's limits),
// every byte of them taking at most two in the message (a quote is \", a
// U+2028 (3 bytes) \u2028; the domain refuses control characters), or,
// for a URI artifact, its URI (which needs no escaping: CleanURI lets
// through no '"' or '\\'), the id of the step that made it, and the
// framing.
const maxArtifactViewBytes = 2*(protocol.MaxNameBytes+protocol.MaxPathBytes) +
	max(2*(protocol.MaxPathBytes+1+protocol.MaxNameBytes), protocol.MaxURIBytes) + 36 + 128

// longestPath is a path of the longest names, within MaxPathBytes, of
// copies of unit.
func longestPath(unit string) string {
	name := strings.Repeat(unit, protocol.MaxNameBytes/len(unit))
	var names []string
	for n := len(name); n <= protocol.MaxPathBytes; n += len(name) + 1 {
		names = append(names, name)
	}
	return strings.Join(names, "/")
}

// The handler input was encoded escaping <, > and & for HTML, in 6 bytes
// each: a task of 10,000 artifacts named "<" made an input of 154 MB
// where docs/SECURITY.md promised 2.6 KiB an artifact. Each artifact now
// takes at most maxArtifactViewBytes, and a text input its bytes (twice
// them for U+2028 or quotes).
func TestTheHandlerInputTakesWhatDocsSecuritySays(t *testing.T) {
	for _, unit := range []string{"<", ">", "&", `"`, "\u2028", "<&>\u2029a"} {
		task := &protocol.Task{TaskID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", Input: new(string), Artifacts: []protocol.Artifact{}}
		base := len(V1.EncodeInput(&protocol.HandlerInput{Handler: protocol.HandlerStep, Task: task}))
		name := strings.Repeat(unit, protocol.MaxNameBytes/len(unit))
		const n = 100
		uri := "s3://b/" + strings.Repeat("%22", (protocol.MaxURIBytes-7)/3)
		if _, _, err := protocol.CleanURI(uri); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"bytes", "URI"} {
			task.Artifacts = task.Artifacts[:0]
			for range n {
				a := protocol.Artifact{ArtifactID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", FileName: name, RelativePath: longestPath(unit),
					StepID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1"}
				if kind == "URI" {
					a.URI = uri
				}
				task.Artifacts = append(task.Artifacts, a)
			}
			in := V1.EncodeInput(&protocol.HandlerInput{Handler: protocol.HandlerStep, Task: task})
			if per := (len(in) - base) / n; per > maxArtifactViewBytes {
				t.Errorf("artifacts of %s named with %q take %d bytes each in the handler input, over %d", kind, unit, per, maxArtifactViewBytes)
			}
		}
		task.Artifacts[0].URI = ""
		in := V1.EncodeInput(&protocol.HandlerInput{Handler: protocol.HandlerStep, Task: task})
		var msg struct {
			Task struct {
				Artifacts []struct {
					WorkspacePath string `json:"workspace_path"`
				}
			}
		}
		if err := json.Unmarshal(in, &msg); err != nil || msg.Task.Artifacts[0].WorkspacePath != task.Artifacts[0].WorkspacePath() {
			t.Errorf("the input does not read back: %v", err)
		}

		// An input of text takes its bytes, twice them at most.
		text := strings.Repeat(unit, (64<<10)/len(unit))
		task.Input, task.Artifacts = &text, nil
		if in := V1.EncodeInput(&protocol.HandlerInput{Handler: protocol.HandlerStep, Task: task}); len(in)-base > 2*len(text) {
			t.Errorf("an input of %d bytes of %q takes %d bytes in the handler input", len(text), unit, len(in)-base)
		}
	}
}
