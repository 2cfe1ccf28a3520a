package abi

import (
	"bufio"
	"flag"
	"os"
	"strings"
	"testing"
)

// The Rust kit's fake host reads destinations and URLs as this package
// does (plugins/rust/src/host/fake/destination.rs), so that a plugin's
// test is refused what agentrt refuses. testdata/destinations holds the
// cases both read, one a line: the reader (grant or target), the input,
// and what this package makes of it: the canonical spelling, or "error:"
// and its words. This test holds the file to this package; the Rust
// test holds the Rust reading to the file. go test -update rewrites the
// file's answers from its inputs.

var update = flag.Bool("update", false, "rewrite the answers of testdata/destinations from this package")

const destinationCases = "testdata/destinations"

// destinationCase is one line of testdata/destinations.
type destinationCase struct{ reader, input, want string }

func readDestinationCases(t *testing.T) []destinationCase {
	t.Helper()
	f, err := os.Open(destinationCases)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []destinationCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 || (parts[0] != "grant" && parts[0] != "target") {
			t.Fatalf("%s: a line is reader<TAB>input<TAB>answer: %q", destinationCases, line)
		}
		cases = append(cases, destinationCase{parts[0], parts[1], parts[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("%s holds %d cases", destinationCases, len(cases))
	}
	return cases
}

// readDestinationCase is what this package makes of c's input.
func readDestinationCase(c destinationCase) string {
	if c.reader == "grant" {
		d, err := ParseDestination(c.input)
		if err != nil {
			return "error: " + err.Error()
		}
		return d.String()
	}
	tg, err := ParseTarget(c.input)
	if err != nil {
		return "error: " + err.Error()
	}
	return tg.String()
}

func TestTheSharedDestinationCasesAreThisPackagesReading(t *testing.T) {
	cases := readDestinationCases(t)
	if *update {
		data, err := os.ReadFile(destinationCases)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if parts := strings.SplitN(line, "\t", 3); len(parts) == 3 && !strings.HasPrefix(line, "#") {
				line = parts[0] + "\t" + parts[1] + "\t" + readDestinationCase(destinationCase{parts[0], parts[1], ""})
			}
			out.WriteString(line + "\n")
		}
		if err := os.WriteFile(destinationCases, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, c := range cases {
		if got := readDestinationCase(c); got != c.want {
			t.Errorf("%s %q: this package reads %q, the file says %q (go test -update rewrites it)", c.reader, c.input, got, c.want)
		}
	}
}
