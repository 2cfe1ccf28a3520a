package secretform

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

// The Rust kit's fake host scrubs and looks for a secret in the same
// forms (plugins/rust/src/host/fake/scrub.rs), so that a plugin's test
// sees what agentrt would show it. ../testdata/secretforms holds values
// of every class of character a secret may hold, each with its forms as
// Of makes them, one JSON object a line; this test holds the file to Of,
// the Rust test holds its forms to the file. go test -update rewrites the
// forms from the values.

var update = flag.Bool("update", false, "rewrite the forms of ../testdata/secretforms from Of")

const sharedForms = "../testdata/secretforms"

type sharedCase struct {
	Value string   `json:"value"`
	Forms []string `json:"forms"`
}

func TestTheSharedFormsAreOfs(t *testing.T) {
	data, err := os.ReadFile(sharedForms)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var c sharedCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s: %v: %q", sharedForms, err, line)
		}
		n++
		got := Of(c.Value)
		if !*update && !slices.Equal(got, c.Forms) {
			t.Errorf("%q: Of makes %q, the file says %q (go test -update rewrites it)", c.Value, got, c.Forms)
		}
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(sharedCase{c.Value, got}); err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("%s holds %d values", sharedForms, n)
	}
	if *update {
		if err := os.WriteFile(sharedForms, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
