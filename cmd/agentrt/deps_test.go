package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agentrt/agentrt"

// allowedImports pins which package may import which: for each package of
// the module, the module's packages and the outside modules it may import
// (the standard library is free unless forbiddenStd says otherwise).
// cmd/agentrt alone wires the others together. A package missing here
// fails the test: say where it sits before it lands.
var allowedImports = map[string][]string{
	// The domain: the Agent Protocol's nouns and rules. No HTTP, no
	// plugin wire format, no SQLite, no wazero.
	"protocol": {"github.com/google/uuid"},
	// The HTTP front end, over the domain only.
	"protocol/httpapi": {"protocol", "github.com/julienschmidt/httprouter"},
	// The plugin wire format: the domain's messages as the ABI's.
	"protocol/wire": {"protocol", "plugins/abi"},
	// Fakes of what the domain reaches through its interfaces (a store, a
	// plugin), for the tests of the domain and its front ends, as
	// net/http/httptest is: real JSON through the wire format, no SQLite.
	"protocol/protocoltest": {"protocol", "protocol/wire"},
	// What tests load: modules assembled from the text format (wat2wasm)
	// and the plugins "make plugins" built. Nothing of the module.
	"runtime/runtimetest": {},
	// Random text for the tests of the domain's and the wire's JSON.
	"protocol/internal/jsontext": {},
	// A client of any Agent Protocol server, and the conformance checks
	// agentrt check runs against one: HTTP only, none of the server.
	"protocol/client":      {},
	"protocol/conformance": {},
	"storage":              {"protocol", "github.com/google/uuid", "modernc.org/sqlite"},
	// A small file system of a test's own, to fill: for tests of a
	// full disk.
	"storage/disktest": {},
	// golang.org/x/sys/unix: memfd_create and mmap at an address, which
	// snapshots' copy-on-write memory needs and package syscall lacks.
	"runtime": {"protocol", "plugins/abi", "github.com/tetratelabs/wazero", "golang.org/x/sys"},
	"hostapi": {"protocol", "plugins/abi", "hostapi/egress", "github.com/tetratelabs/wazero"},
	// A plugin as agentrt runs it: the runtime's compiled module with the
	// host API as its import and ABI v1's codec, a protocol.Plugin. It
	// composes the packages below it, and is the one place that does:
	// runtime, hostapi and protocol/wire do not import one another.
	// wazero only for the type of a host module's instantiation.
	"runtime/plugin": {"protocol", "protocol/wire", "plugins/abi", "runtime", "hostapi", "hostapi/egress", "github.com/tetratelabs/wazero"},
	// The agents a process serves over one store: plugins loaded through
	// runtime/plugin under the limits their manifests get, reloaded and
	// retired, described in protocol's nouns. It reaches the store through
	// an interface of its own (no storage: a second store plugs in) and
	// front ends reach it through theirs (no httpapi: the next front
	// ends describe agents too). fsnotify: it follows the plugin directory.
	"runtime/fleet": {"protocol", "plugins/abi", "plugins/manifest", "runtime", "runtime/plugin", "hostapi", "hostapi/egress",
		"github.com/fsnotify/fsnotify"},
	// Outbound HTTP under an agent's policy: it owns the network.
	"hostapi/egress": {"plugins/abi", "plugins/abi/secretform"},
	// The kit's own source, which agentrt carries for "agentrt new".
	"plugins": {},
	// What plugin authors import: nothing of the host.
	"plugins/abi": {},
	// The forms of a secret's value the host and the kit's test hosts
	// scrub: the standard library only, and no plugin imports it.
	"plugins/abi/secretform": {},
	"plugins/go":             {"plugins/abi", "plugins/go/internal/harness"},
	// Outbound HTTP shaped like net/http's client, over the kit.
	"plugins/go/http":             {"plugins/abi", "plugins/go"},
	"plugins/go/internal/harness": {},
	// The kit's test harness, which plugins' tests import.
	"plugins/go/agenttest": {"plugins/abi", "plugins/abi/secretform", "plugins/go", "plugins/go/internal/harness"},
	// An agent's manifest, checked against its JSON Schema (its
	// destinations by the ABI package's syntax).
	"plugins/manifest": {"plugins/abi", "github.com/santhosh-tekuri/jsonschema/v6"},
	"cmd/agentrt":      {"*"},

	"examples/echo/go":       {"plugins/go"},
	"examples/llm-agent/go":  {"plugins/go", "plugins/go/http"},
	"examples/planner/go":    {"plugins/go"},
	"examples/washington/go": {"plugins/go"},
	"bench/bigfile":          {},
	"bench/egress":           {"hostapi/egress", "plugins/abi"},
	"bench/events":           {},
	"bench/events/plugin":    {"plugins/go"},
	"bench/fsyncprobe":       {},
	// Loads a plugin as agentrt does (runtime/plugin), with a counting
	// host module beside the host API.
	"bench/loops": {"bench/internal/echostep", "runtime", "runtime/plugin", "github.com/tetratelabs/wazero"},
	// An echo step's input and a host for it, for the benchmarks: it
	// calls a plugin runtime/plugin loaded, with a host of its own.
	"bench/internal/echostep": {"hostapi", "plugins/abi", "protocol", "runtime", "runtime/plugin"},
	"bench/sandbox":           {},
	"bench/savestep":          {},
	"bench/seed":              {},
	"bench/soak":              {},
	"bench/tasklist":          {},
	"docs":                    {},
}

// forbiddenStd are standard packages a package must not import: the domain
// reaches files, the network and the database only through its
// interfaces.
var forbiddenStd = map[string][]string{
	"protocol":      {"os", "net", "net/http", "database/sql"},
	"protocol/wire": {"os", "net", "net/http", "database/sql"},
	"plugins/abi":   {"os", "net", "net/http"},
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestEachPackageImportsOnlyWhatItMay(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ok := allowedImports[name]
		if !ok {
			t.Errorf("package %s is not in allowedImports: say what it may import", name)
			continue
		}
		if len(allowed) == 1 && allowed[0] == "*" {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				for _, bad := range forbiddenStd[name] {
					if imp == bad {
						t.Errorf("%s imports %s", name, imp)
					}
				}
				continue // the standard library
			}
			if !allows(allowed, imp) {
				t.Errorf("%s imports %s, which allowedImports does not let it", name, imp)
			}
		}
	}
	if seen < len(allowedImports) {
		t.Errorf("go list found %d packages, allowedImports names %d: remove the ones that are gone", seen, len(allowedImports))
	}
}

// allows reports whether imp is one of allowed: a package of the module by
// its path within it, or an outside module and any package under it.
func allows(allowed []string, imp string) bool {
	for _, a := range allowed {
		if imp == module+"/"+a || imp == a || strings.HasPrefix(imp, a+"/") {
			return true
		}
	}
	return false
}
