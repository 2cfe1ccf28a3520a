package protocol

import "time"

// Limits bound what one plugin call may produce, and what one task may
// hold. docs/SECURITY.md gives each with its flag and the test that holds
// it.
type Limits struct {
	MaxResultBytes int // the handler's result message
	// MaxLogBytes bounds one call's log: log lines, stdout and stderr, each
	// record counted as LogRecordSize counts it (as stored, plus 64 bytes).
	MaxLogBytes int
	// MaxTaskLogBytes bounds a task's log (its task handler's and artifact
	// handlers' records, counted as MaxLogBytes counts them); 0 for no limit.
	MaxTaskLogBytes  int64
	MaxArtifactBytes int64 // one artifact a plugin creates
	MaxCallArtifacts int   // artifacts one call may create
	MaxTaskArtifacts int   // artifacts one task may hold, uploaded and created; 0 for no limit
	// MaxTaskArtifactBytes bounds the bytes of all of a task's artifacts,
	// uploaded and created; 0 for no limit.
	MaxTaskArtifactBytes int64
	MaxUploadBytes       int64 // one uploaded file
	MaxWorkspaceBytes    int64 // all files of one task's workspace
	// MaxWorkspaceFiles bounds the entries of one task's workspace: files
	// and directories alike.
	MaxWorkspaceFiles int
	// MaxPlannedSteps bounds the steps a task handler may plan.
	MaxPlannedSteps int
	// MaxTaskSteps bounds the steps one task may hold, planned ones
	// included; 0 for no limit.
	MaxTaskSteps int
	// MaxTaskTime is the wall-clock time all handler calls of one task may
	// use together; 0 for no limit.
	MaxTaskTime time.Duration
	// MaxBackgroundSteps bounds the steps the agent runs in the
	// background at once (ExecuteStepAsync); 0 is
	// DefaultMaxBackgroundSteps.
	MaxBackgroundSteps int
}

// DefaultLimits are the limits used where none are configured.
var DefaultLimits = Limits{
	MaxResultBytes:       1 << 20,
	MaxLogBytes:          64 << 10,
	MaxTaskLogBytes:      4 << 20,
	MaxArtifactBytes:     64 << 20,
	MaxCallArtifacts:     64,
	MaxTaskArtifacts:     10000,
	MaxTaskArtifactBytes: 1 << 30,
	MaxUploadBytes:       256 << 20,
	MaxWorkspaceBytes:    512 << 20,
	MaxWorkspaceFiles:    10000,
	MaxPlannedSteps:      256,
	MaxTaskSteps:         10000,
	MaxTaskTime:          time.Hour,
	MaxBackgroundSteps:   DefaultMaxBackgroundSteps,
}

// artifactUse is what a task's artifacts hold against the task's quotas:
// how many there are and their bytes. It is counted in one place,
// artifactsOf, and grows with add as a call or an upload makes more.
type artifactUse struct {
	count int
	bytes int64
}

// artifactsOf is what the artifacts task t holds use.
func artifactsOf(t *Task) artifactUse {
	u := artifactUse{count: len(t.Artifacts)}
	for _, a := range t.Artifacts {
		u.bytes += a.Size
	}
	return u
}

// add counts one more artifact of size bytes.
func (u *artifactUse) add(size int64) {
	u.count++
	u.bytes += size
}

// checkArtifact refuses one more artifact of size bytes for a task whose
// artifacts use u (ETOOLARGE): see checkArtifactCount and
// checkArtifactBytes.
func (l *Limits) checkArtifact(u artifactUse, size int64) error {
	if err := l.checkArtifactCount(u); err != nil {
		return err
	}
	return l.checkArtifactBytes(u, size)
}

// checkArtifactCount refuses one more artifact for a task whose artifacts
// use u, when it holds all the artifacts it may.
func (l *Limits) checkArtifactCount(u artifactUse) error {
	if l.MaxTaskArtifacts > 0 && u.count >= l.MaxTaskArtifacts {
		return Errorf(ETOOLARGE, "the task holds %d artifacts, the most a task may hold (%d)", u.count, l.MaxTaskArtifacts)
	}
	return nil
}

// checkArtifactBytes refuses size more bytes of artifacts for a task whose
// artifacts use u, over the task's artifact bytes quota.
func (l *Limits) checkArtifactBytes(u artifactUse, size int64) error {
	if n := u.bytes + size; l.MaxTaskArtifactBytes > 0 && n > l.MaxTaskArtifactBytes {
		return Errorf(ETOOLARGE, "the task's artifacts would hold %d bytes, over their quota of %d bytes", n, l.MaxTaskArtifactBytes)
	}
	return nil
}

// artifactRoom is how many bytes one more artifact may hold for a task
// whose artifacts use u, within the task's artifact bytes quota and at
// most max; quota reports whether the quota is what limits it.
func (l *Limits) artifactRoom(u artifactUse, max int64) (room int64, quota bool) {
	if q := l.MaxTaskArtifactBytes; q > 0 && q-u.bytes < max {
		return q - u.bytes, true
	}
	return max, false
}

// WorkspaceQuota is what a task's workspace may hold.
func (l *Limits) WorkspaceQuota() WorkspaceQuota {
	return WorkspaceQuota{Bytes: l.MaxWorkspaceBytes, Entries: l.MaxWorkspaceFiles}
}

// maxPlanned is how many steps a task handler may plan.
func (l *Limits) maxPlanned() int {
	if l.MaxTaskSteps > 0 && l.MaxTaskSteps < l.MaxPlannedSteps {
		return l.MaxTaskSteps
	}
	return l.MaxPlannedSteps
}
