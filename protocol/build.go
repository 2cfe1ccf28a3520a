package protocol

import "sync"

// Build is what an Agent runs: a plugin, the limits it runs under and the
// settings it reads. An Agent serves one build at a time; Serve replaces
// it without a pause.
type Build struct {
	Plugin Plugin
	// ID identifies the plugin's code (the sha256 of its file, in hex).
	// Every step records the agent's name and the ID of the build that
	// ran it.
	ID     string
	Limits Limits
	// Settings are the operator's settings the plugin reads with the host
	// API's config function. Not for secrets: plugins log freely.
	Settings map[string]string
	// Schemes are the URI schemes the agent accepts in uploads and may
	// produce; a nil list is DefaultArtifactSchemes' (an empty one is
	// none).
	Schemes ArtifactSchemes
}

// served is a build in service, counted while operations use it.
type served struct {
	*Build
	config  []byte // Settings as JSON
	schemes ArtifactSchemes
	refs    int
	retired bool
	drained chan struct{}
}

// buildSlot holds the build an Agent serves.
type buildSlot struct {
	mu  sync.Mutex
	cur *served
}

// acquire returns the build being served, for one operation (creating a
// task, executing a step, an upload) to use from start to end; release it
// when done. ECONFLICT when the agent serves none: its plugin was removed.
func (a *Agent) acquire() (*served, error) {
	s := &a.build
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, Errorf(ECONFLICT, "agent %q is gone: its plugin was removed; its tasks stay readable", a.name)
	}
	s.cur.refs++
	return s.cur, nil
}

// release ends an operation's use of b.
func (a *Agent) release(b *served) {
	s := &a.build
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.refs--; b.refs == 0 && b.retired {
		close(b.drained)
	}
}

// Serve makes b the build that operations starting from now use; nil
// serves none (the agent is gone: creating tasks, executing steps and
// uploads get ECONFLICT, while its tasks stay readable). Operations in
// progress finish on the build they started with: the channel returned is
// closed once none uses the build b replaces, which may then be closed.
func (a *Agent) Serve(b *Build) (drained <-chan struct{}) {
	var next *served
	if b != nil {
		next = newServed(b)
	}
	s := &a.build
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.cur
	s.cur = next
	if prev == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	prev.retired = true
	if prev.refs == 0 {
		close(prev.drained)
	}
	return prev.drained
}

// Serving returns the build the agent serves, nil when none.
func (a *Agent) Serving() *Build {
	s := &a.build
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.cur.Build
}

// newServed is build b ready to serve, its settings as the JSON its
// plugin reads.
func newServed(b *Build) *served {
	settings := b.Settings
	if settings == nil {
		settings = map[string]string{}
	}
	conf, _ := MarshalJSON(settings) // strings always marshal
	next := &served{Build: b, config: conf, schemes: b.Schemes, drained: make(chan struct{})}
	if next.schemes.Input == nil {
		next.schemes.Input = DefaultArtifactSchemes.Input
	}
	if next.schemes.Output == nil {
		next.schemes.Output = DefaultArtifactSchemes.Output
	}
	return next
}
