package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/plugins/manifest"
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
