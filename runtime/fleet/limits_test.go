package fleet

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
)

// A manifest tightens the operator's limits and never loosens them: each
// limit is the smaller of the two; where 0 means no limit, a manifest may
// set one the operator did not, and asking for none gets the operator's;
// memory is whole pages; an agent's own instance bound is at most the
// fleet's.
func TestAManifestTightensTheOperatorsLimitsAndNeverLoosensThem(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.Limits.CallTimeout = 5 * time.Second
	cfg.Limits.Memory = 256 << 20
	cfg.Limits.MaxTaskTime = 0 // none
	cfg.Limits.MaxTaskSteps = 100
	cfg.Limits.Egress.Timeout = 10 * time.Second
	cfg.MaxInstances = 8
	f := New(nil, cfg)

	for _, tc := range []struct {
		name     string
		manifest string // "": none
		check    func(l Limits) bool
	}{
		{"no manifest: the operator's", "", func(l Limits) bool {
			return l.CallTimeout == 5*time.Second && l.Memory == 256<<20 && l.MaxInstances == 0 && l.MaxTaskSteps == 100
		}},
		{"less: less", `{"limits":{"call_timeout":"1s","memory":"64MiB","http_timeout":"2s"}}`, func(l Limits) bool {
			return l.CallTimeout == time.Second && l.Memory == 64<<20 && l.Egress.Timeout == 2*time.Second
		}},
		{"more: the operator's", `{"limits":{"call_timeout":"10m","memory":"4GiB","http_timeout":"1m"}}`, func(l Limits) bool {
			return l.CallTimeout == 5*time.Second && l.Memory == 256<<20 && l.Egress.Timeout == 10*time.Second
		}},
		{"memory in whole pages", `{"limits":{"memory":100000}}`, func(l Limits) bool {
			return l.Memory == 64<<10
		}},
		{"a limit where the operator set none", `{"limits":{"task_time":"1m"}}`, func(l Limits) bool {
			return l.MaxTaskTime == time.Minute
		}},
		{"no limit asked for: the operator's", `{"limits":{"max_task_steps":0}}`, func(l Limits) bool {
			return l.MaxTaskSteps == 100
		}},
		{"an instance bound of its own", `{"limits":{"max_instances":2}}`, func(l Limits) bool {
			return l.MaxInstances == 2
		}},
		{"an instance bound over the fleet's: the fleet's", `{"limits":{"max_instances":100}}`, func(l Limits) bool {
			return l.MaxInstances == 8
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m *manifest.Manifest
			if tc.manifest != "" {
				var err error
				if m, err = manifest.Parse("agent.json", strings.NewReader(tc.manifest)); err != nil {
					t.Fatal(err)
				}
			}
			if l := f.limitsFor(m); !tc.check(l) {
				t.Errorf("limits: %+v", l)
			}
		})
	}
}

// Every limit a manifest can set, each to a value of its own, so that a
// limit left out of limitsFor, read from another, or whose 0 is taken the
// wrong way shows: a manifest asking for less of each gets exactly that,
// 0 included where 0 is a limit; asking for more of each gets the
// operator's; asking for none (0) where 0 means none gets the operator's; where the operator set none, it gets
// what it asks. The operator's own instance bound (Limits.MaxInstances)
// is never an agent's.
func TestEachLimitAManifestSetsIsTheSmallerOfItsOwnAndTheOperators(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.Limits.MaxTaskTime = time.Hour
	cfg.Limits.MaxInstances = 3 // not read: an agent has a bound of its own only when its manifest asks
	cfg.MaxInstances = 8
	op := cfg.Limits
	op.MaxInstances = 0

	// less asks for less than op of every limit, each a value no other
	// limit has.
	less := `{"limits":{"call_timeout":"1s","memory":"64MiB","max_upload":1001,"max_artifact":1002,
		"max_result":1003,"max_log":1004,"max_task_log":1005,"max_workspace":1006,"max_workspace_files":7,
		"max_call_artifacts":8,"max_task_artifacts":9,"max_task_artifact_bytes":1010,"max_planned_steps":11,
		"max_task_steps":12,"task_time":"13s","max_host_calls":14,"max_table_entries":15,"max_instances":2,
		"http_timeout":"16s","max_http_requests":17,"max_http_request":1018,"max_http_response":1019,"max_background_steps":20}}`
	asked := op
	asked.CallTimeout, asked.Memory = time.Second, 64<<20
	asked.MaxUploadBytes, asked.MaxArtifactBytes, asked.MaxResultBytes, asked.MaxLogBytes = 1001, 1002, 1003, 1004
	asked.MaxTaskLogBytes, asked.MaxWorkspaceBytes, asked.MaxWorkspaceFiles, asked.MaxCallArtifacts = 1005, 1006, 7, 8
	asked.MaxTaskArtifacts, asked.MaxTaskArtifactBytes, asked.MaxPlannedSteps, asked.MaxTaskSteps = 9, 1010, 11, 12
	asked.MaxTaskTime, asked.MaxHostCalls, asked.MaxTableEntries, asked.MaxInstances = 13*time.Second, 14, 15, 2
	asked.Egress = egress.Limits{Timeout: 16 * time.Second, MaxRequests: 17, MaxRequestBytes: 1018, MaxResponseBytes: 1019}
	asked.MaxBackgroundSteps = 20

	more := `{"limits":{"call_timeout":"1h","memory":"4GiB","max_upload":"512GiB","max_artifact":"512GiB",
		"max_result":"512GiB","max_log":"512GiB","max_task_log":"512GiB","max_workspace":"512GiB","max_workspace_files":1000000000,
		"max_call_artifacts":1000000000,"max_task_artifacts":1000000000,"max_task_artifact_bytes":"512GiB",
		"max_planned_steps":1000000000,"max_task_steps":1000000000,"task_time":"1000h","max_host_calls":1000000000,
		"max_table_entries":4294967295,"max_instances":1000000000,"http_timeout":"1h","max_http_requests":1000000000,
		"max_http_request":"512GiB","max_http_response":"512GiB","max_background_steps":1000000000}}`
	opMore := op
	opMore.MaxInstances = cfg.MaxInstances // asked for more than the fleet's bound: the fleet's

	none := `{"limits":{"max_task_log":0,"max_task_artifacts":0,"max_task_artifact_bytes":0,"max_task_steps":0,"task_time":"0s"}}`
	noneSet := cfg
	noneSet.Limits.MaxTaskLogBytes, noneSet.Limits.MaxTaskArtifacts, noneSet.Limits.MaxTaskArtifactBytes = 0, 0, 0
	noneSet.Limits.MaxTaskSteps, noneSet.Limits.MaxTaskTime = 0, 0
	some := `{"limits":{"max_task_log":1005,"max_task_artifacts":9,"max_task_artifact_bytes":1010,"max_task_steps":12,"task_time":"13s"}}`
	opNone := noneSet.Limits
	opNone.MaxInstances = 0
	someOfNone := opNone
	someOfNone.MaxTaskLogBytes, someOfNone.MaxTaskArtifacts, someOfNone.MaxTaskArtifactBytes = 1005, 9, 1010
	someOfNone.MaxTaskSteps, someOfNone.MaxTaskTime = 12, 13*time.Second

	// zero asks for 0 of every limit where 0 is a limit and not none.
	zero := `{"limits":{"max_upload":0,"max_artifact":0,"max_result":0,"max_log":0,"max_workspace":0,
		"max_workspace_files":0,"max_call_artifacts":0,"max_planned_steps":0,"max_http_requests":0,
		"max_http_request":0,"max_http_response":0}}`
	zeros := op
	zeros.MaxUploadBytes, zeros.MaxArtifactBytes, zeros.MaxResultBytes, zeros.MaxLogBytes = 0, 0, 0, 0
	zeros.MaxWorkspaceBytes, zeros.MaxWorkspaceFiles, zeros.MaxCallArtifacts, zeros.MaxPlannedSteps = 0, 0, 0, 0
	zeros.Egress.MaxRequests, zeros.Egress.MaxRequestBytes, zeros.Egress.MaxResponseBytes = 0, 0, 0

	for _, tc := range []struct {
		name     string
		cfg      Config
		manifest string
		want     Limits
	}{
		{"less of each: each as asked", cfg, less, asked},
		{"0 where 0 is a limit: 0", cfg, zero, zeros},
		{"more of each: the operator's", cfg, more, opMore},
		{"none where 0 is none: the operator's", cfg, none, op},
		{"some where the operator set none: as asked", noneSet, some, someOfNone},
		{"none where the operator set none: none", noneSet, none, opNone},
		{"no limits: the operator's", cfg, `{}`, op},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := manifest.Parse("agent.json", strings.NewReader(tc.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if got := New(nil, tc.cfg).limitsFor(m); got != tc.want {
				t.Errorf("limits:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}

	// The manifest asking for less sets every limit a manifest has, so
	// that a limit added to manifests is added here too.
	m, err := manifest.Parse("agent.json", strings.NewReader(less))
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(m.Limits)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("the manifest asking for less leaves out limits.%s", v.Type().Field(i).Name)
		}
	}
}

// The bound on an agent's background steps never loosens, and is never
// off: a manifest asks for less of the operator's, or of the default the
// agent would read for the operator's 0; a manifest holding 0 (made
// without Parse, which refuses it) gets the operator's, not an agent's
// default that may be more.
func TestAnAgentsBackgroundBoundIsNeverLooserThanTheOperatorsNorOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    int
		asked *int
		want  int
	}{
		{"none asked: the operator's", 2, nil, 2},
		{"less: less", 8, ptr(3), 3},
		{"more: the operator's", 2, ptr(100), 2},
		{"the operator's 0 is the default, and a manifest tightens it", 0, ptr(3), 3},
		{"the operator's 0 is the default", 0, nil, protocol.DefaultMaxBackgroundSteps},
		{"the operator's negative is the default", -1, ptr(1000), protocol.DefaultMaxBackgroundSteps},
		{"a manifest's 0: the operator's", 2, ptr(0), 2},
		{"a manifest's negative: the operator's", 2, ptr(-5), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "")
			cfg.Limits.MaxBackgroundSteps = tc.op
			m := &manifest.Manifest{Limits: manifest.Limits{MaxBackgroundSteps: tc.asked}}
			if got := New(nil, cfg).limitsFor(m).MaxBackgroundSteps; got != tc.want {
				t.Errorf("max background steps %d, want %d", got, tc.want)
			}
			if tc.asked == nil {
				if got := New(nil, cfg).limitsFor(nil).MaxBackgroundSteps; got != tc.want {
					t.Errorf("without a manifest: max background steps %d, want %d", got, tc.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
