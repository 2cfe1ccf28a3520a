package fleet

import (
	"time"

	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
)

// Limits are the limits one agent runs under: the domain's (quotas,
// budgets, sizes), the sandbox's, and its outbound HTTP's.
type Limits struct {
	protocol.Limits
	// CallTimeout caps one handler call, instantiation included.
	CallTimeout time.Duration
	// Memory caps one instance's memory, in bytes: a multiple of 64 KiB.
	Memory int64
	// MaxHostCalls caps the host calls of one handler call.
	MaxHostCalls int
	// MaxTableEntries caps the entries of one instance's tables.
	MaxTableEntries int
	// MaxInstances bounds this agent's instances running at once; 0:
	// only the fleet's bound.
	MaxInstances int
	// Egress are the limits of its outbound requests.
	Egress egress.Limits
}

// limitsFor are the limits of an agent whose manifest asks for m's: each
// the operator's, or less where the manifest asks for less. A manifest
// asking for more gets the operator's maximum. For limits where 0 means
// none, a manifest may set one where the operator set none.
func (f *Fleet) limitsFor(m *manifest.Manifest) Limits {
	l := f.cfg.Limits
	l.MaxInstances = 0
	if l.MaxBackgroundSteps <= 0 { // as the agent would read it: never a manifest's 0 or less
		l.MaxBackgroundSteps = protocol.DefaultMaxBackgroundSteps
	}
	if m == nil {
		return l
	}
	ml := m.Limits
	l.CallTimeout = tighter(l.CallTimeout, ml.CallTimeout, false)
	l.MaxTaskTime = tighter(l.MaxTaskTime, ml.TaskTime, true)
	l.Memory = tighter(l.Memory, ml.Memory, false) &^ (64<<10 - 1) // whole pages
	l.MaxUploadBytes = tighter(l.MaxUploadBytes, ml.MaxUpload, false)
	l.MaxArtifactBytes = tighter(l.MaxArtifactBytes, ml.MaxArtifact, false)
	l.MaxResultBytes = int(tighter(int64(l.MaxResultBytes), ml.MaxResult, false))
	l.MaxLogBytes = int(tighter(int64(l.MaxLogBytes), ml.MaxLog, false))
	l.MaxTaskLogBytes = tighter(l.MaxTaskLogBytes, ml.MaxTaskLog, true)
	l.MaxWorkspaceBytes = tighter(l.MaxWorkspaceBytes, ml.MaxWorkspace, false)
	l.MaxTaskArtifactBytes = tighter(l.MaxTaskArtifactBytes, ml.MaxTaskArtifactBytes, true)
	l.MaxWorkspaceFiles = tighter(l.MaxWorkspaceFiles, ml.MaxWorkspaceFiles, false)
	l.MaxCallArtifacts = tighter(l.MaxCallArtifacts, ml.MaxCallArtifacts, false)
	l.MaxTaskArtifacts = tighter(l.MaxTaskArtifacts, ml.MaxTaskArtifacts, true)
	l.MaxPlannedSteps = tighter(l.MaxPlannedSteps, ml.MaxPlannedSteps, false)
	l.MaxTaskSteps = tighter(l.MaxTaskSteps, ml.MaxTaskSteps, true)
	if v := ml.MaxBackgroundSteps; v != nil && *v >= 1 { // the manifest's parser refuses less
		l.MaxBackgroundSteps = min(l.MaxBackgroundSteps, *v)
	}
	l.MaxHostCalls = tighter(l.MaxHostCalls, ml.MaxHostCalls, false)
	l.MaxTableEntries = tighter(l.MaxTableEntries, ml.MaxTableEntries, false)
	if v := ml.MaxInstances; v != nil {
		l.MaxInstances = min(*v, f.cfg.MaxInstances)
	}
	l.Egress = egressLimitsFor(l.Egress, &ml)
	return l
}

// tighter is the limit an agent runs under when the operator's is op and
// its manifest asks for v (nil: nothing): the smaller, so that a manifest
// never loosens a limit. Where zeroIsNone, 0 means no limit: a manifest
// asking for none gets the operator's, and one asking for some gets it
// where the operator set none.
func tighter[T int | int64 | time.Duration](op T, v *T, zeroIsNone bool) T {
	switch {
	case v == nil:
		return op
	case zeroIsNone && *v == 0:
		return op
	case zeroIsNone && op == 0:
		return *v
	}
	return min(op, *v)
}

// egressLimitsFor are the outbound HTTP limits of an agent whose manifest
// asks for m's: each the operator's, or less.
func egressLimitsFor(op egress.Limits, m *manifest.Limits) egress.Limits {
	l := op
	l.Timeout = tighter(l.Timeout, m.HTTPTimeout, false)
	l.MaxRequests = tighter(l.MaxRequests, m.MaxHTTPRequests, false)
	l.MaxRequestBytes = tighter(l.MaxRequestBytes, m.MaxHTTPRequest, false)
	l.MaxResponseBytes = tighter(l.MaxResponseBytes, m.MaxHTTPResponse, false)
	return l
}

// describe names each limit as a manifest does.
func (l Limits) describe() map[string]any {
	d := map[string]any{
		"call_timeout":            l.CallTimeout.String(),
		"memory":                  l.Memory,
		"max_upload":              l.MaxUploadBytes,
		"max_artifact":            l.MaxArtifactBytes,
		"max_result":              l.MaxResultBytes,
		"max_log":                 l.MaxLogBytes,
		"max_task_log":            l.MaxTaskLogBytes,
		"max_workspace":           l.MaxWorkspaceBytes,
		"max_workspace_files":     l.MaxWorkspaceFiles,
		"max_call_artifacts":      l.MaxCallArtifacts,
		"max_task_artifacts":      l.MaxTaskArtifacts,
		"max_task_artifact_bytes": l.MaxTaskArtifactBytes,
		"max_planned_steps":       l.MaxPlannedSteps,
		"max_task_steps":          l.MaxTaskSteps,
		"task_time":               l.MaxTaskTime.String(),
		"max_host_calls":          l.MaxHostCalls,
		"max_table_entries":       l.MaxTableEntries,
		"max_background_steps":    l.MaxBackgroundSteps,
		"http_timeout":            l.Egress.Timeout.String(),
		"max_http_requests":       l.Egress.MaxRequests,
		"max_http_request":        l.Egress.MaxRequestBytes,
		"max_http_response":       l.Egress.MaxResponseBytes,
	}
	if l.MaxInstances > 0 {
		d["max_instances"] = l.MaxInstances
	}
	return d
}
