package fleet

import (
	"context"
	"time"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/hostapi/egress"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/plugins/manifest"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
)

// build is a loaded plugin with what it runs under.
type build struct {
	plugin   *plugin.Plugin     // with the egress client that makes its outbound requests
	limiter  *runtime.Limiter   // the agent's own bound on its instances; nil: none
	manifest *manifest.Manifest // nil without one
	limits   Limits
	settings map[string]string
	loadedAt time.Time
	// http describes what the operator granted its outbound requests.
	http *protocol.OutboundHTTP
}

// newBuild loads the plugin at path as a build of the agent name, whose
// manifest is m (nil: none): under the limits m gets (limitsFor), with
// its settings and the outbound HTTP the operator grants it. code, when
// not nil, is what the caller read of the file.
func (f *Fleet) newBuild(ctx context.Context, path string, code []byte, name string, m *manifest.Manifest) (*build, error) {
	l := f.limitsFor(m)
	limiters := []*runtime.Limiter{f.limiter}
	var own *runtime.Limiter
	if l.MaxInstances > 0 {
		// The agent's own bound first: a call waiting for one of its
		// agent's instances holds none of the fleet's.
		own = runtime.NewLimiter(l.MaxInstances, f.cfg.MaxQueue, f.cfg.QueueWait)
		limiters = []*runtime.Limiter{own, f.limiter}
	}
	client, http, notes := f.egressFor(name, m, l.Egress)
	cfg := plugin.Config{
		Runtime: runtime.Config{
			CacheDir:         f.cfg.CacheDir,
			MemoryLimitPages: uint32(l.Memory / (64 << 10)),
			MaxTableEntries:  uint32(l.MaxTableEntries),
			MaxPluginBytes:   f.cfg.MaxPluginBytes,
			CallTimeout:      l.CallTimeout,
			Limiters:         limiters,
			NoSnapshots:      f.cfg.NoSnapshots,
			Version:          f.cfg.Version,
		},
		Host:   hostapi.Config{MaxCalls: l.MaxHostCalls},
		Egress: client,
		Log:    f.log,
	}
	var p *plugin.Plugin
	var err error
	if code != nil {
		p, err = plugin.Compile(ctx, path, code, cfg)
	} else {
		p, err = plugin.Load(ctx, path, cfg)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	for _, n := range notes {
		f.log.Warn("outbound HTTP: a grant that does not apply", "agent", name, "note", n)
	}
	if f.cfg.Metrics != nil {
		f.cfg.Metrics.PluginCompiled(p.Cache())
	}
	settings := map[string]string{}
	if m != nil {
		for k, v := range m.Settings {
			settings[k] = v
		}
	}
	for k, v := range f.cfg.Settings { // the operator's win
		settings[k] = v
	}
	return &build{plugin: p, limiter: own, manifest: m, limits: l, settings: settings, loadedAt: time.Now(), http: http}, nil
}

// egressFor makes the outbound HTTP client of a build of agent name,
// whose manifest is m (nil: none), under limits l, and describes what it
// was granted for /agents/NAME. notes say what the operator granted that
// the manifest does not ask for, for the log.
func (f *Fleet) egressFor(name string, m *manifest.Manifest, l egress.Limits) (*egress.Client, *protocol.OutboundHTTP, []string) {
	var asked []abi.Destination
	if m != nil {
		asked = m.Capabilities.HTTP
	}
	policy, notes := f.cfg.Egress.Grants.For(name, asked, asked != nil)
	client := egress.New(egress.Config{Agent: name, Policy: policy, Limits: l, Resolver: f.cfg.Egress.Resolver,
		TLS: f.cfg.Egress.TLS, Log: f.log})
	info := &protocol.OutboundHTTP{Asked: destinationNames(asked), Granted: destinationNames(policy.Allow),
		PrivateHosts: append([]string{}, policy.PrivateHosts...), Secrets: []protocol.HeldSecret{}}
	if asked == nil {
		info.Asked = nil
	}
	for _, s := range policy.Secrets {
		info.Secrets = append(info.Secrets, protocol.HeldSecret{Name: s.Name, Destinations: destinationNames(s.Destinations)})
	}
	return client, info, notes
}

func destinationNames(ds []abi.Destination) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

// retire makes next (nil: none) serve agent a, and closes the build it
// replaces once the calls on it have ended. f.mu is held.
func (f *Fleet) retire(a *agent, next *build) {
	var pb *protocol.Build
	if next != nil {
		pb = next.protocolBuild()
	}
	drained := a.agent.Serve(pb)
	old := a.build
	a.build = next
	if old == nil {
		return
	}
	f.retiring.Add(1)
	go func() {
		defer f.retiring.Done()
		<-drained
		if err := old.plugin.Close(context.Background()); err != nil {
			f.log.Warn("closing a replaced build", "agent", a.name, "err", err)
		}
	}()
}

// protocolBuild is the build as the domain runs it.
func (b *build) protocolBuild() *protocol.Build {
	return &protocol.Build{Plugin: b.plugin, ID: b.plugin.SHA256(), Limits: b.limits.Limits, Settings: b.settings,
		Schemes: b.schemes()}
}

// schemes are the URI schemes of the build's agent: its manifest's lists,
// and agentrt's default for a list it leaves out.
func (b *build) schemes() protocol.ArtifactSchemes {
	s := protocol.DefaultArtifactSchemes
	if b.manifest != nil && b.manifest.Capabilities.ArtifactSchemes != nil {
		if m := b.manifest.Capabilities.ArtifactSchemes; m.Input != nil {
			s.Input = m.Input
		}
		if m := b.manifest.Capabilities.ArtifactSchemes; m.Output != nil {
			s.Output = m.Output
		}
	}
	return s
}
