package wire

import (
	"bufio"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// The kits' test hosts (plugins/go/agenttest, the Rust kit's fake host)
// refuse the results agentrt refuses, so that a plugin's own test does not
// pass where agentrt fails the call. plugins/abi/testdata/results holds
// the cases all three read, one a line: the handler, the result, and what
// agentrt makes of it. This test holds the file to agentrt; the kits'
// tests hold themselves to the file. go test -update-kit-results rewrites
// the file's answers from its inputs.

var updateKitResults = flag.Bool("update-kit-results", false, "rewrite the answers of plugins/abi/testdata/results from agentrt's reading")

const kitResults = "../../plugins/abi/testdata/results"

// hostReadsResult is what agentrt makes of result, the handler's result:
// "refused: " and why set_result refuses it (protocol.Call.SetResult checks
// it with CheckJSON), "invalid: " and why the call fails as it is decoded,
// or "ok".
func hostReadsResult(handler, result string) string {
	b := []byte(result)
	if err := protocol.CheckJSON(b, protocol.MaxJSONDepth); err != nil {
		return "refused: " + err.Error()
	}
	var err error
	switch handler {
	case "step":
		_, err = V1.DecodeStepResult(b)
	case "task":
		_, err = V1.DecodeTaskResult(b, 256)
	case "artifact":
		_, err = V1.DecodeArtifactResult(b)
	case "download":
		_, err = V1.DecodeDownloadResult(b)
	default:
		return "no handler " + handler
	}
	if err != nil {
		return "invalid: " + err.Error()
	}
	return "ok"
}

func TestTheKitsSharedResultCasesAreAgentrtsReading(t *testing.T) {
	data, err := os.ReadFile(kitResults)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			t.Fatalf("%s: a line is handler<TAB>result<TAB>answer: %q", kitResults, line)
		}
		n++
		got := hostReadsResult(parts[0], parts[1])
		if got != parts[2] && !*updateKitResults {
			t.Errorf("%s result %s: agentrt reads %q, the file says %q (go test -update-kit-results rewrites it)", parts[0], parts[1], got, parts[2])
		}
		out.WriteString(parts[0] + "\t" + parts[1] + "\t" + got + "\n")
	}
	if n < 40 {
		t.Fatalf("%s holds %d cases", kitResults, n)
	}
	if *updateKitResults {
		if err := os.WriteFile(kitResults, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
