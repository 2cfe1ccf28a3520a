package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// openAPIDoc is the part of an OpenAPI document these tests read.
type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Servers []struct {
		URL string `json:"url"`
	} `json:"servers"`
	Paths map[string]map[string]json.RawMessage `json:"paths"`
}

func readOpenAPI(t *testing.T, b []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") || len(doc.Paths) == 0 || len(doc.Servers) == 0 {
		t.Fatalf("openapi.json is not an OpenAPI 3.0 document with paths and servers: %.200s", b)
	}
	return doc
}

// httpMethods are the members of an OpenAPI path item that are
// operations; the others (parameters, servers, x-…) are not.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

var routeParam = regexp.MustCompile(`:([a-z_]+)`)

// specPath is the document's path of a route the server registers: its
// parameters in braces, and a protocol route without the /agents/:agent
// before it (the document's servers give both bases). The server's own
// routes (/agents, /healthz, /readyz, /metrics) are at the root.
func specPath(path string) string {
	if rest, ok := strings.CutPrefix(path, "/agents/:agent"+Prefix); ok {
		path = Prefix + rest
	}
	return routeParam.ReplaceAllString(path, "{$1}")
}

// TestTheServedSpecHasEveryRouteAndEveryPathInItIsServed holds the
// document we serve (openapi.json) to the routes NewServer registers:
// each route, at the root and under /agents/NAME, is an operation of the
// document; each operation of the document is a route, at every base
// its servers name.
func TestTheServedSpecHasEveryRouteAndEveryPathInItIsServed(t *testing.T) {
	srv := newTestServer(t, ServerConfig{})
	doc := readOpenAPI(t, OpenAPI)
	if len(srv.routes) < 20 {
		t.Fatalf("the server registers %d routes; the test reads them from Server.routes", len(srv.routes))
	}
	for _, r := range srv.routes {
		path := specPath(r.path)
		item, ok := doc.Paths[path]
		if !ok {
			t.Errorf("%s %s is served, but the spec has no path %s", r.method, r.path, path)
			continue
		}
		if _, ok := item[strings.ToLower(r.method)]; !ok {
			t.Errorf("%s %s is served, but the spec's path %s has no %s", r.method, r.path, path, strings.ToLower(r.method))
		}
	}
	var operations []string
	for path, item := range doc.Paths {
		bases := []string{}
		for _, s := range doc.Servers {
			bases = append(bases, s.URL)
		}
		if raw, ok := item["servers"]; ok {
			var servers []struct{ URL string }
			if err := json.Unmarshal(raw, &servers); err != nil {
				t.Fatalf("%s: servers: %v", path, err)
			}
			bases = bases[:0]
			for _, s := range servers {
				bases = append(bases, s.URL)
			}
		}
		for method := range item {
			if !slices.Contains(httpMethods, method) {
				if method != "servers" && method != "parameters" && !strings.HasPrefix(method, "x-") {
					t.Errorf("%s has %q, which is neither an operation nor a path item's field", path, method)
				}
				continue
			}
			operations = append(operations, method+" "+path)
			for _, base := range bases {
				full := strings.TrimSuffix(strings.ReplaceAll(base, "{agent}", "echo"), "/") + path
				full = regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(full, "0195f3c4-7b1a-7c2d-8e3f-4a5b6c7d8e9f")
				full = strings.ReplaceAll(full, "/agents/0195f3c4-7b1a-7c2d-8e3f-4a5b6c7d8e9f", "/agents/echo")
				if h, _, _ := srv.router.Lookup(strings.ToUpper(method), full); h == nil {
					t.Errorf("the spec has %s %s, but %s %s is not served", method, path, strings.ToUpper(method), full)
				}
			}
		}
	}
	sort.Strings(operations)
	if len(operations) < 15 {
		t.Errorf("the spec has only %d operations: %v", len(operations), operations)
	}
}

// The document is what GET /ap/v1/openapi.json (and the same under an
// agent) answers, byte for byte, and every reference in it resolves.
func TestTheSpecIsServedAsItIsAndItsReferencesResolve(t *testing.T) {
	srv := newTestServer(t, ServerConfig{})
	for _, path := range []string{"/ap/v1/openapi.json", "/agents/echo/ap/v1/openapi.json"} {
		w := serveRequest(srv, "GET", path, "")
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != string(OpenAPI) {
			t.Errorf("GET %s: %d %s, %d bytes; want the document", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	}
	var all any
	if err := json.Unmarshal(OpenAPI, &all); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	refs := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if ref, ok := e.(string); ok && k == "$ref" {
					refs++
					if !resolves(all, ref) {
						t.Errorf("$ref %s resolves to nothing", ref)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(all)
	if refs < 10 {
		t.Errorf("only %d references found", refs)
	}
}

// resolves reports whether the local reference ref ("#/components/…")
// names a value of doc.
func resolves(doc any, ref string) bool {
	if !strings.HasPrefix(ref, "#/") {
		return false
	}
	v := doc
	for _, seg := range strings.Split(ref[2:], "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if v, ok = m[seg]; !ok {
			return false
		}
	}
	return true
}
