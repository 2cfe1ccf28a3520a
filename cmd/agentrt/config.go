package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/fleet"
	"github.com/agentrt/agentrt/storage"
)

// Config is the server's configuration as one document: what "agentrt
// run" and "agentrt serve" are told, read from a JSON file
// (--server-config FILE), with the flags as overrides. Each section
// holds what one package is configured with: http the HTTP front end
// (protocol/httpapi), data the store (storage), limits each agent's
// limits (runtime/fleet; named as a manifest names them), sandbox the
// instances of every plugin together (runtime) and the steps they run
// in the background (runtime/fleet), egress outbound HTTP
// (hostapi/egress, its policy file's document inline), memory the
// caches' bounds (storage) and the Go runtime's, log the server's
// log, plugins what serve serves and the plugins' settings. Every flag
// of run and serve is a field and every field a flag
// (TestEveryFlagIsAFieldOfTheConfigurationAndBack); config.schema.json
// describes the document (TestTheSchemaAgreesWithTheConfiguration).
//
// A file is read strictly: I-JSON, every member named as written, no
// unknown member, each value of its field's type; an error names the
// field (http.max_uploads). Validation that involves several fields, or
// a flag, happens once, on the effective configuration, and names the
// field or the flag that set the value (runConfigOf).
type Config struct {
	HTTP    HTTPConfig    `json:"http"`
	Data    DataConfig    `json:"data"`
	Memory  MemoryConfig  `json:"memory"`
	Log     LogConfig     `json:"log"`
	Limits  LimitsConfig  `json:"limits"`
	Sandbox SandboxConfig `json:"sandbox"`
	Egress  EgressConfig  `json:"egress"`
	Plugins PluginsConfig `json:"plugins"`

	// file is the file read, "" for none; policyDir is where the file that
	// held Egress.Policy is: a secret's file is relative to it.
	file, policyDir string
}

// HTTPConfig is the HTTP front end (httpapi.ServerConfig) and its
// listener.
type HTTPConfig struct {
	Addr                string     `json:"addr"`                   // -addr
	MaxBody             size       `json:"max_body"`               // -max-body
	BodyTimeout         duration   `json:"body_timeout"`           // -body-timeout
	MinBodyRate         size       `json:"min_body_rate"`          // -min-body-rate
	MaxUploads          int        `json:"max_uploads"`            // -max-uploads
	MaxUploadsPerClient int        `json:"max_uploads_per_client"` // -max-uploads-per-client
	RequireAuth         bool       `json:"require_auth"`           // -require-auth
	AccessLog           bool       `json:"access_log"`             // -access-log
	ShutdownTimeout     duration   `json:"shutdown_timeout"`       // -shutdown-timeout
	DebugAddr           string     `json:"debug_addr"`             // -debug-addr
	CORS                CORSConfig `json:"cors"`
	// A step's client that goes away cancels it (protocol.AgentConfig,
	// through the fleet); event streams' heartbeat and write timeout.
	CancelOnDisconnect bool     `json:"cancel_on_disconnect"` // -cancel-on-disconnect
	EventHeartbeat     duration `json:"event_heartbeat"`      // -event-heartbeat
	EventWriteTimeout  duration `json:"event_write_timeout"`  // -event-write-timeout
}

// CORSConfig is httpapi.CORS.
type CORSConfig struct {
	Origins []string `json:"origins"` // -cors-origins
	Methods []string `json:"methods"` // -cors-methods
	Headers []string `json:"headers"` // -cors-headers
	MaxAge  duration `json:"max_age"` // -cors-max-age
}

// DataConfig is the data directory (storage).
type DataConfig struct {
	Dir         string        `json:"dir"`           // -data
	Cache       string        `json:"cache"`         // -cache
	MinFreeDisk diskFloorFlag `json:"min_free_disk"` // -min-free-disk
	// The bounds of each task's event log (storage.Config.EventBounds).
	MaxTaskEvents     int  `json:"max_task_events"`      // -max-task-events
	MaxTaskEventBytes size `json:"max_task_event_bytes"` // -max-task-event-bytes
}

// MemoryConfig bounds what the server holds in memory besides its
// plugins' instances (docs/MEMORY.md).
type MemoryConfig struct {
	TaskCache size `json:"task_cache"` // -task-cache
	DBCache   size `json:"db_cache"`   // -db-cache
	GoLimit   size `json:"go_limit"`   // -go-memory-limit
}

// LogConfig is the server's log.
type LogConfig struct {
	Level  string `json:"level"`  // -log-level
	Format string `json:"format"` // -log-format
}

// LimitsConfig are each agent's limits, its defaults and the most its
// manifest may ask for (fleet.Limits), named as a manifest's limits are.
type LimitsConfig struct {
	CallTimeout          duration `json:"call_timeout"`            // -call-timeout
	Memory               size     `json:"memory"`                  // -memory
	MaxUpload            size     `json:"max_upload"`              // -max-upload
	MaxArtifact          size     `json:"max_artifact"`            // -max-artifact
	MaxResult            size     `json:"max_result"`              // -max-result
	MaxLog               size     `json:"max_log"`                 // -max-log
	MaxTaskLog           size     `json:"max_task_log"`            // -max-task-log
	MaxWorkspace         size     `json:"max_workspace"`           // -max-workspace
	MaxWorkspaceFiles    int      `json:"max_workspace_files"`     // -max-workspace-files
	MaxCallArtifacts     int      `json:"max_call_artifacts"`      // -max-call-artifacts
	MaxTaskArtifacts     int      `json:"max_task_artifacts"`      // -max-task-artifacts
	MaxTaskArtifactBytes size     `json:"max_task_artifact_bytes"` // -max-task-artifact-bytes
	MaxPlannedSteps      int      `json:"max_planned_steps"`       // -max-planned-steps
	MaxTaskSteps         int      `json:"max_task_steps"`          // -max-task-steps
	TaskTime             duration `json:"task_time"`               // -task-time
	MaxHostCalls         int      `json:"max_host_calls"`          // -max-host-calls
	MaxTableEntries      int      `json:"max_table_entries"`       // -max-table-entries
	HTTPTimeout          duration `json:"http_timeout"`            // -http-timeout
	MaxHTTPRequests      int      `json:"max_http_requests"`       // -max-http-requests
	MaxHTTPRequest       size     `json:"max_http_request"`        // -max-http-request
	MaxHTTPResponse      size     `json:"max_http_response"`       // -max-http-response
	MaxBackgroundSteps   int      `json:"max_background_steps"`    // -max-background-steps
}

// SandboxConfig bounds the plugins of the server together (runtime), and
// the steps they run in the background (runtime/fleet).
type SandboxConfig struct {
	MaxInstances  int      `json:"max_instances"`   // -max-instances
	MaxQueue      int      `json:"max_queue"`       // -max-queue
	QueueWait     duration `json:"queue_wait"`      // -queue-wait
	MaxPluginSize size     `json:"max_plugin_size"` // -max-plugin-size
	Snapshots     bool     `json:"snapshots"`       // -snapshots
	// StepTimeout is a background step's time limit; the steps every
	// agent runs in the background together are at most
	// MaxBackgroundStepsTotal.
	StepTimeout             duration `json:"step_timeout"`               // -step-timeout
	MaxBackgroundStepsTotal int      `json:"max_background_steps_total"` // -max-background-steps-total
}

// EgressConfig is what agents may reach (hostapi/egress): grants as the
// flags write them, a policy file, or its document inline.
type EgressConfig struct {
	Allow        []string `json:"allow"`         // -allow-http, [AGENT=]DEST
	PrivateHosts []string `json:"private_hosts"` // -allow-private-host, [AGENT=]HOST
	SecretEnv    []string `json:"secret_env"`    // -secret-env, [AGENT=]NAME@DEST
	PolicyFile   string   `json:"policy_file"`   // -http-policy
	// Policy is a policy file's document, inline (docs/SECURITY.md,
	// "Outbound HTTP"); a secret's file is relative to this file's
	// directory. No flag sets it.
	Policy json.RawMessage `json:"policy,omitempty"`
}

// PluginsConfig is what serve serves, and the plugins' settings.
type PluginsConfig struct {
	Dir          string            `json:"dir"`           // serve's -plugins
	Default      string            `json:"default"`       // serve's -default
	Settings     map[string]string `json:"settings"`      // -config KEY=VALUE
	SettingsFile string            `json:"settings_file"` // -config-file
}

// defaultConfig is the configuration of a server told nothing.
func defaultConfig() *Config {
	l := protocol.DefaultLimits
	e := egress.DefaultLimits
	return &Config{
		HTTP: HTTPConfig{
			Addr:                "127.0.0.1:8000",
			MaxBody:             httpapi.DefaultMaxBodyBytes,
			BodyTimeout:         duration(httpapi.DefaultBodyTimeout),
			MinBodyRate:         httpapi.DefaultMinBodyRate,
			MaxUploads:          httpapi.DefaultMaxUploads,
			MaxUploadsPerClient: httpapi.DefaultMaxUploadsPerClient,
			ShutdownTimeout:     duration(30 * time.Second),
			CORS:                CORSConfig{Origins: []string{}, Methods: []string{}, Headers: []string{}, MaxAge: duration(10 * time.Minute)},
			EventHeartbeat:      duration(httpapi.DefaultEventHeartbeat),
			EventWriteTimeout:   duration(httpapi.DefaultEventWriteTimeout),
		},
		Data: DataConfig{Dir: "./agentrt-data", MinFreeDisk: diskFloorFlag{auto: true},
			MaxTaskEvents: protocol.DefaultEventBounds.Count, MaxTaskEventBytes: size(protocol.DefaultEventBounds.Bytes)},
		Memory: MemoryConfig{TaskCache: storage.DefaultTaskCacheBytes, DBCache: storage.DefaultDBCacheBytes},
		Log:    LogConfig{Level: "info", Format: "text"},
		Limits: LimitsConfig{
			CallTimeout:          duration(runtime.DefaultCallTimeout),
			Memory:               size(runtime.DefaultMemoryLimitPages) * 64 << 10,
			MaxUpload:            size(l.MaxUploadBytes),
			MaxArtifact:          size(l.MaxArtifactBytes),
			MaxResult:            size(l.MaxResultBytes),
			MaxLog:               size(l.MaxLogBytes),
			MaxTaskLog:           size(l.MaxTaskLogBytes),
			MaxWorkspace:         size(l.MaxWorkspaceBytes),
			MaxWorkspaceFiles:    l.MaxWorkspaceFiles,
			MaxCallArtifacts:     l.MaxCallArtifacts,
			MaxTaskArtifacts:     l.MaxTaskArtifacts,
			MaxTaskArtifactBytes: size(l.MaxTaskArtifactBytes),
			MaxPlannedSteps:      l.MaxPlannedSteps,
			MaxTaskSteps:         l.MaxTaskSteps,
			TaskTime:             duration(l.MaxTaskTime),
			MaxHostCalls:         hostapi.DefaultMaxCalls,
			MaxTableEntries:      runtime.DefaultMaxTableEntries,
			HTTPTimeout:          duration(e.Timeout),
			MaxHTTPRequests:      e.MaxRequests,
			MaxHTTPRequest:       size(e.MaxRequestBytes),
			MaxHTTPResponse:      size(e.MaxResponseBytes),
			MaxBackgroundSteps:   l.MaxBackgroundSteps,
		},
		Sandbox: SandboxConfig{
			MaxInstances:  max(8, 4*cpus),
			MaxQueue:      256,
			QueueWait:     duration(30 * time.Second),
			MaxPluginSize: runtime.DefaultMaxPluginBytes,
			Snapshots:     true,

			StepTimeout:             duration(protocol.DefaultStepTimeout),
			MaxBackgroundStepsTotal: fleet.DefaultMaxBackgroundSteps,
		},
		Egress:  EgressConfig{Allow: []string{}, PrivateHosts: []string{}, SecretEnv: []string{}},
		Plugins: PluginsConfig{Settings: map[string]string{}},
	}
}

// maxConfigBytes bounds a configuration file.
const maxConfigBytes = 1 << 20

// loadConfig reads the configuration file path over c: what the file
// sets replaces c's, what it leaves out stays. Its errors name the file
// and the field.
func (c *Config) load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fmt.Errorf("server config %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return fmt.Errorf("server config %s: larger than %d KiB", path, maxConfigBytes>>10)
	}
	if err := c.decode(data); err != nil {
		return fmt.Errorf("server config %s: %w", path, err)
	}
	c.file = path
	if len(c.Egress.Policy) > 0 {
		c.policyDir = filepath.Dir(path)
	}
	return nil
}

// configFields are the member names Config's objects are read by, as
// written.
var configFields = protocol.JSONFieldsOf(reflect.TypeFor[Config]())

// decode reads data, a configuration document, over c.
func (c *Config) decode(data []byte) error {
	if err := protocol.CheckJSONFields(data, protocol.MaxJSONDepth, configFields); err != nil {
		return err
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return errors.New("want a JSON object")
	}
	return decodeInto(reflect.ValueOf(c).Elem(), data, "")
}

// decodeInto decodes the JSON object data into the struct v, member by
// member, so that an error names the member's path (at, "" at the top):
// an unknown member, or a value not of its field's type.
func decodeInto(v reflect.Value, data []byte, at string) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return fmt.Errorf("%swant an object", pathPrefix(at))
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	t := v.Type()
	for _, name := range names {
		raw := members[name]
		i := fieldIndex(t, name)
		if i < 0 {
			return fmt.Errorf("%s: unknown field (%s has %s)", join(at, name), orTop(at), strings.Join(fieldNames(t), ", "))
		}
		field := v.Field(i)
		if field.Kind() == reflect.Struct && !isLeaf(field.Type()) { // a section
			if err := decodeInto(field, raw, join(at, name)); err != nil {
				return err
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue // null: as if left out
		}
		// A fresh value of the field's type: a list or a map in the file
		// replaces the default's.
		fresh := reflect.New(field.Type())
		if err := json.Unmarshal(raw, fresh.Interface()); err != nil {
			return fmt.Errorf("%s: %s", join(at, name), describeValueError(err, field.Type()))
		}
		field.Set(fresh.Elem())
	}
	return nil
}

// isLeaf reports whether a struct type is a value of its own (a size, a
// disk floor), not a section.
func isLeaf(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

// fieldIndex is the index of t's field named name in JSON, -1 if none.
func fieldIndex(t reflect.Type, name string) int {
	for i := range t.NumField() {
		if tagName(t.Field(i)) == name {
			return i
		}
	}
	return -1
}

func tagName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if n := tagName(t.Field(i)); n != "" && n != "-" {
			names = append(names, n)
		}
	}
	return names
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

func pathPrefix(at string) string {
	if at == "" {
		return ""
	}
	return at + ": "
}

func orTop(at string) string {
	if at == "" {
		return "the configuration"
	}
	return at
}

// describeValueError says what a field of type t wants, for a value that
// is not one.
func describeValueError(err error, t reflect.Type) string {
	var want string
	switch t {
	case reflect.TypeFor[size]():
		want = "a size: a whole number of bytes, or a string such as \"512KiB\", \"64MiB\" or \"1GiB\""
	case reflect.TypeFor[duration]():
		want = "a duration: a string such as \"30s\", \"10m\" or \"1h30m\""
	case reflect.TypeFor[diskFloorFlag]():
		want = "\"auto\" or a size such as \"1GiB\""
	default:
		switch t.Kind() {
		case reflect.Int:
			want = "a whole number"
		case reflect.Bool:
			want = "true or false"
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "a list of strings"
		case reflect.Map:
			want = "an object of strings"
		default:
			return err.Error()
		}
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("want %s, not %s", want, typeErr.Value)
	}
	return "want " + want
}

// field names a field of the configuration in an error: its path, and
// the file it was read from.
func (c *Config) field(path string) string {
	if c.file == "" {
		return path
	}
	return path + " (" + c.file + ")"
}

// hidden stands for a secret's value where the configuration is shown.
const hidden = "(hidden)"

// shown is c as "agentrt config" prints it: every field, secrets' values
// hidden (a secret is shown by its name, where it comes from, its agents
// and destinations).
func (c *Config) shown() ([]byte, error) {
	show := *c
	if len(c.Egress.Policy) > 0 {
		var policy map[string]any
		if err := json.Unmarshal(c.Egress.Policy, &policy); err != nil {
			return nil, err
		}
		if secrets, ok := policy["secrets"].(map[string]any); ok {
			for _, s := range secrets {
				if s, ok := s.(map[string]any); ok && s["value"] != nil {
					s["value"] = hidden
				}
			}
		}
		b, err := json.Marshal(policy)
		if err != nil {
			return nil, err
		}
		show.Egress.Policy = b
	}
	return json.MarshalIndent(show, "", "  ")
}

// duration is a time.Duration as a flag and a configuration field take
// it: "30s", "1h30m".
type duration time.Duration

func (d *duration) String() string { return time.Duration(*d).String() }

func (d *duration) Set(v string) error {
	t, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want a duration such as 30s, 10m or 1h30m")
	}
	*d = duration(t)
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return d.Set(s)
}

// A size in a configuration is a whole number of bytes or a string with
// a unit, as its flag takes it; it is written with its unit.

func (s size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (s *size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 {
			return errors.New("negative")
		}
		*s = size(n)
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return s.Set(v)
}

func (f diskFloorFlag) MarshalJSON() ([]byte, error) {
	if f.auto {
		return json.Marshal("auto")
	}
	return f.n.MarshalJSON()
}

func (f *diskFloorFlag) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) == nil {
		return f.Set(v)
	}
	f.auto = false
	return f.n.UnmarshalJSON(b)
}
