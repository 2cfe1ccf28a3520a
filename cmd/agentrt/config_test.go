package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// configFlag is a flag of run or serve, the field of the configuration it
// sets, and a value for each that sets the same thing (not the default).
type configFlag struct {
	flag, value string
	field       string // a path: "http.max_uploads"
	json        string // the field's value in a file
}

// configFlags are every flag of run and serve that is a field of the
// configuration: each is, and each field but egress.policy (a document
// no flag can hold) has its flag.
var configFlags = []configFlag{
	{"addr", "0.0.0.0:9000", "http.addr", `"0.0.0.0:9000"`},
	{"max-body", "2MiB", "http.max_body", `"2MiB"`},
	{"body-timeout", "20s", "http.body_timeout", `"20s"`},
	{"min-body-rate", "32KiB", "http.min_body_rate", `32768`},
	{"max-uploads", "9", "http.max_uploads", `9`},
	{"max-uploads-per-client", "-1", "http.max_uploads_per_client", `-1`},
	{"require-auth", "true", "http.require_auth", `true`},
	{"access-log", "true", "http.access_log", `true`},
	{"shutdown-timeout", "1m", "http.shutdown_timeout", `"60s"`},
	{"debug-addr", "127.0.0.1:6060", "http.debug_addr", `"127.0.0.1:6060"`},
	{"cors-origins", "https://app.example", "http.cors.origins", `["https://app.example"]`},
	{"cors-methods", "get,post", "http.cors.methods", `["GET","POST"]`},
	{"cors-headers", "X-A", "http.cors.headers", `["X-A"]`},
	{"cors-max-age", "1h", "http.cors.max_age", `"1h"`},
	{"data", "/srv/agentrt", "data.dir", `"/srv/agentrt"`},
	{"cache", "/srv/cache", "data.cache", `"/srv/cache"`},
	{"min-free-disk", "2GiB", "data.min_free_disk", `"2GiB"`},
	{"task-cache", "64MiB", "memory.task_cache", `"64MiB"`},
	{"db-cache", "0", "memory.db_cache", `0`},
	{"go-memory-limit", "512MiB", "memory.go_limit", `536870912`},
	{"log-level", "warn", "log.level", `"warn"`},
	{"log-format", "json", "log.format", `"json"`},
	{"call-timeout", "7s", "limits.call_timeout", `"7s"`},
	{"memory", "64MiB", "limits.memory", `"64MiB"`},
	{"max-upload", "1GiB", "limits.max_upload", `1073741824`},
	{"max-artifact", "1MiB", "limits.max_artifact", `"1MiB"`},
	{"max-result", "2MiB", "limits.max_result", `"2MiB"`},
	{"max-log", "128KiB", "limits.max_log", `"128KiB"`},
	{"max-task-log", "0", "limits.max_task_log", `0`},
	{"max-workspace", "1GiB", "limits.max_workspace", `"1GiB"`},
	{"max-workspace-files", "7", "limits.max_workspace_files", `7`},
	{"max-call-artifacts", "3", "limits.max_call_artifacts", `3`},
	{"max-task-artifacts", "5", "limits.max_task_artifacts", `5`},
	{"max-task-artifact-bytes", "10MB", "limits.max_task_artifact_bytes", `"10MB"`},
	{"max-planned-steps", "4", "limits.max_planned_steps", `4`},
	{"max-task-steps", "40", "limits.max_task_steps", `40`},
	{"task-time", "2h", "limits.task_time", `"2h"`},
	{"max-host-calls", "50", "limits.max_host_calls", `50`},
	{"max-table-entries", "1000", "limits.max_table_entries", `1000`},
	{"http-timeout", "5s", "limits.http_timeout", `"5s"`},
	{"max-http-requests", "2", "limits.max_http_requests", `2`},
	{"max-http-request", "1MiB", "limits.max_http_request", `"1MiB"`},
	{"max-http-response", "1MiB", "limits.max_http_response", `"1MiB"`},
	{"max-instances", "3", "sandbox.max_instances", `3`},
	{"max-queue", "5", "sandbox.max_queue", `5`},
	{"queue-wait", "3s", "sandbox.queue_wait", `"3s"`},
	{"max-plugin-size", "8MiB", "sandbox.max_plugin_size", `"8MiB"`},
	{"snapshots", "false", "sandbox.snapshots", `false`},
	{"allow-http", "llm=https://api.example.com/v1/", "egress.allow", `["llm=https://api.example.com/v1/"]`},
	{"allow-private-host", "localhost", "egress.private_hosts", `["localhost"]`},
	{"secret-env", "llm=AGENTRT_TEST_KEY@https://api.example.com/v1/", "egress.secret_env", `["llm=AGENTRT_TEST_KEY@https://api.example.com/v1/"]`},
	{"http-policy", "POLICY", "egress.policy_file", `"POLICY"`},
	{"plugins", "/srv/plugins", "plugins.dir", `"/srv/plugins"`},
	{"default", "llm", "plugins.default", `"llm"`},
	{"config", "greeting=hi", "plugins.settings", `{"greeting":"hi"}`},
	{"config-file", "SETTINGS", "plugins.settings_file", `"SETTINGS"`},
	{"step-timeout", "5m", "sandbox.step_timeout", `"5m"`},
	{"max-background-steps", "3", "limits.max_background_steps", `3`},
	{"max-background-steps-total", "7", "sandbox.max_background_steps_total", `7`},
	{"cancel-on-disconnect", "true", "http.cancel_on_disconnect", `true`},
	{"max-task-events", "50", "data.max_task_events", `50`},
	{"max-task-event-bytes", "2MiB", "data.max_task_event_bytes", `"2MiB"`},
	{"event-heartbeat", "30s", "http.event_heartbeat", `"30s"`},
	{"event-write-timeout", "5s", "http.event_write_timeout", `"5s"`},
}

// notConfig are the flags of run and serve that are not fields: the
// agent run names, run's dev mode, and the file itself.
var notConfig = []string{"name", "dev", "server-config"}

// fileOf writes a configuration file setting field to the JSON value v.
func fileOf(t *testing.T, field, v string) string {
	t.Helper()
	parts := strings.Split(field, ".")
	doc := v
	for i := len(parts) - 1; i >= 0; i-- {
		doc = `{"` + parts[i] + `":` + doc + `}`
	}
	return writeConfig(t, doc)
}

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentrt.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// placeholders puts the files the flags name where they are.
func placeholders(t *testing.T, v string) string {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	settings := filepath.Join(dir, "settings.json")
	os.WriteFile(policy, []byte(`{"agents":{"llm":{"http":["https://api.example.com/v1/"]}}}`), 0o600)
	os.WriteFile(settings, []byte(`{"greeting":"hello"}`), 0o600)
	return strings.NewReplacer("POLICY", policy, "SETTINGS", settings).Replace(v)
}

// Every flag of run and serve sets a field of the configuration, and the
// field in a file sets exactly what the flag does; every field has its
// flag (but the inline policy).
func TestEveryFlagIsAFieldOfTheConfigurationAndBack(t *testing.T) {
	t.Setenv("AGENTRT_TEST_KEY", "sk-test-0123456789")
	known := map[string]bool{}
	for _, f := range configFlags {
		known[f.flag] = true
		t.Run(f.flag, func(t *testing.T) {
			value, jsonValue := placeholders(t, f.value), placeholders(t, f.json)
			byFlag, err := parseServeFlags([]string{"--plugins", "dir", "--" + f.flag + "=" + value}, io.Discard)
			if err != nil {
				t.Fatalf("--%s %s: %v", f.flag, value, err)
			}
			byFile, err := parseServeFlags([]string{"--plugins", "dir", "--server-config", fileOf(t, f.field, jsonValue)}, io.Discard)
			if f.flag == "plugins" {
				byFile, err = parseServeFlags([]string{"--server-config", fileOf(t, f.field, jsonValue)}, io.Discard)
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", f.field, jsonValue, err)
			}
			defaults, err := parseServeFlags([]string{"--plugins", "dir"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			byFlag.doc, byFile.doc, defaults.doc = nil, nil, nil
			if !reflect.DeepEqual(byFlag, byFile) {
				t.Errorf("--%s %s and %s: %s differ:\nflag %+v\nfile %+v", f.flag, value, f.field, jsonValue, byFlag, byFile)
			}
			if reflect.DeepEqual(byFlag, defaults) {
				t.Errorf("--%s %s changes nothing: the table's value is the default", f.flag, value)
			}
		})
	}
	// Every flag of run and serve is in the table, or not a field.
	for _, command := range []string{"run", "serve"} {
		runFlags(command, defaultConfig(), &runConfig{}, io.Discard).VisitAll(func(fl *flag.Flag) {
			if !known[fl.Name] && !slices.Contains(notConfig, fl.Name) {
				t.Errorf("%s's flag -%s is not a field of the configuration (configFlags)", command, fl.Name)
			}
		})
	}
	// Every field of the configuration is a flag's, but the inline policy.
	fields := map[string]bool{}
	for _, f := range configFlags {
		fields[f.field] = true
	}
	for _, path := range leafFields(reflect.TypeFor[Config](), "") {
		if !fields[path] && path != "egress.policy" {
			t.Errorf("the field %s has no flag (configFlags)", path)
		}
	}
}

// leafFields are the paths of t's fields that hold values, not sections.
func leafFields(t reflect.Type, at string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := tagName(f)
		if name == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && !isLeaf(f.Type) {
			out = append(out, leafFields(f.Type, join(at, name))...)
			continue
		}
		out = append(out, join(at, name))
	}
	return out
}

// A flag given wins over the file; a list flag adds to the file's list;
// what the file sets and no flag does holds.
func TestAFlagWinsOverTheFile(t *testing.T) {
	file := writeConfig(t, `{"limits":{"max_upload":"1GiB","memory":"64MiB"},"http":{"cors":{"origins":["https://a.example"]}},"plugins":{"settings":{"a":"file","b":"file"}}}`)
	cfg, err := parseRunFlags([]string{"p.wasm", "--server-config", file, "--max-upload", "2GiB", "--cors-origins", "https://b.example", "--config", "b=flag"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.limits.MaxUploadBytes != 2<<30 || cfg.memoryLimit != 64<<20 {
		t.Errorf("max upload %d, memory %d: want the flag's 2 GiB and the file's 64 MiB", cfg.limits.MaxUploadBytes, cfg.memoryLimit)
	}
	if !slices.Equal(cfg.cors.Origins, []string{"https://a.example", "https://b.example"}) {
		t.Errorf("origins %v: want the file's, then the flag's", cfg.cors.Origins)
	}
	if cfg.pluginConfig["a"] != "file" || cfg.pluginConfig["b"] != "flag" {
		t.Errorf("settings %v: want a from the file, b from the flag", cfg.pluginConfig)
	}
}

// A file that is wrong is refused naming the file and the field, and so
// is a value a flag would refuse; a flag's bad value names the flag.
func TestABadConfigurationNamesTheField(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"htp":{}}`, "htp: unknown field (the configuration has http, data, memory, log, limits, sandbox, egress, plugins)"},
		{`{"http":{"max_upload":1}}`, "http.max_upload: unknown field (http has addr, max_body,"},
		{`{"HTTP":{}}`, `"HTTP": member names are case-sensitive; did you mean "http"?`},
		{`{"http":{"max_uploads":"9"}}`, "http.max_uploads: want a whole number, not string"},
		{`{"http":{"max_uploads":1.5}}`, "http.max_uploads: want a whole number"},
		{`{"limits":{"memory":"64 megs"}}`, "limits.memory: want a size: a whole number of bytes, or a string such as"},
		{`{"limits":{"memory":-1}}`, "limits.memory: want a size"},
		{`{"limits":{"call_timeout":30}}`, "limits.call_timeout: want a duration: a string such as"},
		{`{"limits":{"call_timeout":"soon"}}`, "limits.call_timeout: want a duration"},
		{`{"data":{"min_free_disk":"lots"}}`, `data.min_free_disk: want "auto" or a size`},
		{`{"http":{"max_uploads":9,"max_uploads":10}}`, "duplicate member name at http.max_uploads"},
		{`{"limits":{"max_task_steps":1e400}}`, "number out of range"},
		{`[]`, "want a JSON object"},
		{`{"http":[]}`, "http: want an object"},
		{`{"limits":{"memory":"1KiB"}}`, "bad limits.memory (FILE) 1KiB: want from 64KiB to 4GiB"},
		{`{"http":{"max_uploads_per_client":0}}`, "bad http.max_uploads_per_client (FILE) 0: want -1"},
		{`{"sandbox":{"max_instances":0}}`, "bad sandbox.max_instances (FILE) 0: want 1 or more"},
		{`{"memory":{"go_limit":"1MiB"}}`, "bad memory.go_limit (FILE) 1MiB: want 0 (none) or at least 32MiB"},
		{`{"log":{"level":"loud"}}`, `bad log.level (FILE) "loud"`},
		{`{"limits":{"http_timeout":"0s"}}`, "bad limits.http_timeout (FILE) 0s: want more than 0s"},
		{`{"egress":{"allow":["https://ok.example/","ftp://x"]}}`, `bad egress.allow[1] (FILE) "ftp://x"`},
		{`{"egress":{"policy":{"secrets":{"K":{"value":"sk-secret-value-1","agents":["a"]}}}}}`, "egress.policy (FILE): secret K: name the destinations"},
		{`{"http":{"cors":{"origins":["app.example"]}}}`, "bad http.cors.origins (FILE)"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			file := writeConfig(t, tc.doc)
			_, err := parseRunFlags([]string{"p.wasm", "--server-config", file}, io.Discard)
			want := strings.ReplaceAll(tc.want, "FILE", file)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
				t.Errorf("%s: %v, want an error naming %s and %q", tc.doc, err, file, want)
			}
			if strings.Contains(tc.doc, "sk-secret-value-1") && strings.Contains(err.Error(), "sk-secret-value-1") {
				t.Errorf("the error holds a secret's value: %v", err)
			}
			// config check says the same, and exits 1.
			var stderr bytes.Buffer
			err = runMain(t.Context(), []string{"config", "check", file}, io.Discard, &stderr)
			if err == nil || exitCode(err) != 1 && exitCode(err) != 2 || !strings.Contains(err.Error(), want) {
				t.Errorf("config check: %v (exit %d), want %q", err, exitCode(err), want)
			}
		})
	}
	// A flag's bad value names the flag, as it always did.
	file := writeConfig(t, `{"limits":{"memory":"64MiB"}}`)
	if _, err := parseRunFlags([]string{"p.wasm", "--server-config", file, "--memory", "1KiB"}, io.Discard); err == nil || !strings.Contains(err.Error(), "bad -memory 1KiB") {
		t.Errorf("a bad flag over a good file: %v, want it to name -memory", err)
	}
}

// agentrt config prints the effective configuration, which read back is
// itself; a secret is shown by its name, never its value.
func TestConfigPrintsTheEffectiveConfigurationWithoutSecrets(t *testing.T) {
	const value, envValue = "sk-inline-secret-0123456789", "sk-env-secret-0123456789"
	t.Setenv("AGENTRT_TEST_KEY", envValue)
	file := writeConfig(t, `{"egress":{"policy":{"secrets":{"INLINE":{"value":"`+value+`","agents":["llm"],"destinations":["https://api.example.com/v1/"]}}}}}`)
	var out, stderr bytes.Buffer
	err := runMain(t.Context(), []string{"config", "--server-config", file, "--max-upload", "3GiB",
		"--secret-env", "llm=AGENTRT_TEST_KEY@https://api.example.com/v1/"}, &out, &stderr)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, stderr.String())
	}
	printed := out.String()
	for _, v := range []string{value, envValue} {
		if strings.Contains(printed, v) {
			t.Errorf("agentrt config printed a secret's value:\n%s", printed)
		}
	}
	for _, want := range []string{`"max_upload": "3GiB"`, `"INLINE"`, `"value": "(hidden)"`, `"llm=AGENTRT_TEST_KEY@https://api.example.com/v1/"`} {
		if !strings.Contains(printed, want) {
			t.Errorf("agentrt config printed no %s:\n%s", want, printed)
		}
	}
	// Without secrets, what it prints reads back as itself.
	out.Reset()
	if err := runMain(t.Context(), []string{"config", "--max-upload", "3GiB", "--allow-http", "https://api.example.com/"}, &out, &stderr); err != nil {
		t.Fatal(err)
	}
	first := out.String()
	out.Reset()
	if err := runMain(t.Context(), []string{"config", "--server-config", writeConfig(t, first)}, &out, &stderr); err != nil {
		t.Fatalf("config of config's output: %v", err)
	}
	if out.String() != first {
		t.Errorf("agentrt config's output read back prints\n%s\nnot\n%s", out.String(), first)
	}
}

// A server started with a configuration file serves under it: a limit
// set in the file is the agent's.
func TestAServerRunsUnderItsConfigurationFile(t *testing.T) {
	file := writeConfig(t, `{"limits":{"max_task_steps":7,"memory":"64MiB"},"plugins":{"settings":{"greeting":"from the file"}}}`)
	cfg, err := parseRunFlags([]string{examplePlugin(t, "echo-go"), "--server-config", file, "--data", t.TempDir(),
		"--cache", filepath.Join(buildDir, "cache")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	info := ts.agentInfo(cfg.name)
	if info == nil || info.Limits["max_task_steps"] != float64(7) || info.Limits["memory"] != float64(64<<20) {
		t.Errorf("the agent runs under %+v, want max_task_steps 7 and memory 64 MiB from the file", info)
	}
}

// The JSON Schema of the configuration says what the reader does: it
// takes what agentrt config prints, refuses what the reader refuses for
// its type, and its limits are a manifest's (but max_instances, which
// is sandbox's).
func TestTheSchemaAgreesWithTheConfiguration(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustRead(t, "config.schema.json")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	valid := func(s string) bool {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return sch.Validate(v) == nil
	}
	var out bytes.Buffer
	if err := runMain(t.Context(), []string{"config", "--allow-http", "https://api.example.com/", "--cors-origins", "*"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !valid(out.String()) {
		t.Errorf("the schema refuses what agentrt config prints:\n%s", out.String())
	}
	for _, f := range configFlags {
		if d := `{"` + strings.ReplaceAll(f.field, ".", `":{"`) + `":` + f.json + strings.Repeat("}", strings.Count(f.field, ".")+1); !valid(d) {
			t.Errorf("the schema refuses %s", d)
		}
	}
	for _, bad := range []string{`{"htp":{}}`, `{"http":{"max_uploads":"9"}}`, `{"limits":{"memory":"64 megs"}}`,
		`{"limits":{"call_timeout":30}}`, `{"data":{"min_free_disk":"lots"}}`, `{"log":{"level":"loud"}}`,
		`{"sandbox":{"max_instances":0}}`, `{"http":{"max_uploads_per_client":0}}`, `{"limits":{"max_instances":2}}`} {
		if valid(bad) {
			t.Errorf("the schema takes %s, which agentrt refuses", bad)
		}
	}
	var config, mf struct {
		Properties map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	json.Unmarshal(mustRead(t, "config.schema.json"), &config)
	json.Unmarshal(manifest.Schema, &mf)
	want := mf.Properties["limits"].Properties
	delete(want, "max_instances")
	if got := config.Properties["limits"].Properties; !reflect.DeepEqual(got, want) {
		t.Errorf("the configuration's limits are not a manifest's:\n%v\nwant\n%v", got, want)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docs/CONFIG.md's example is a configuration agentrt reads, and its
// table names every field.
func TestTheConfigurationDocsExampleReadsAndItsTableIsWhole(t *testing.T) {
	doc := string(mustRead(t, filepath.Join(repoRoot, "docs", "CONFIG.md")))
	_, example, ok := strings.Cut(doc, "```json\n")
	example, _, _ = strings.Cut(example, "```")
	if !ok {
		t.Fatal("docs/CONFIG.md has no JSON example")
	}
	t.Setenv("OPENAI_API_KEY", "sk-example-0123456789")
	if _, err := parseServeFlags([]string{"--server-config", writeConfig(t, example)}, io.Discard); err != nil {
		t.Errorf("docs/CONFIG.md's example: %v", err)
	}
	for _, path := range leafFields(reflect.TypeFor[Config](), "") {
		section, name := "", path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			section, name = path[:i], path[i+1:]
		}
		at := strings.Index(doc, "### `"+section+"`")
		if at < 0 || !strings.Contains(doc[at:], "| `"+name+"` |") {
			t.Errorf("docs/CONFIG.md's table has no %s", path)
		}
	}
}
