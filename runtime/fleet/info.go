package fleet

import (
	"context"
	"sort"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
)

// List describes every agent, and every plugin file that failed to
// become one, in name order. It implements httpapi.Agents.
func (f *Fleet) List(ctx context.Context) ([]protocol.AgentInfo, error) {
	f.mu.RLock()
	infos := make([]protocol.AgentInfo, 0, len(f.agents))
	for _, a := range f.agents {
		infos = append(infos, f.info(a))
	}
	for _, pf := range f.files {
		if pf.agent == "" && f.agents[pf.name] == nil {
			infos = append(infos, failedFileInfo(pf))
		}
	}
	f.mu.RUnlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	kept := infos[:0]
	for i := range infos {
		if err := f.countTasks(ctx, &infos[i]); err != nil {
			return nil, err
		}
		if infos[i].State != "removed" || infos[i].Tasks > 0 {
			kept = append(kept, infos[i]) // a removed agent is listed while it has tasks
		}
	}
	return kept, nil
}

// Info describes the agent named name: ENOTFOUND when there is none. It
// implements httpapi.Agents.
func (f *Fleet) Info(ctx context.Context, name string) (*protocol.AgentInfo, error) {
	f.mu.RLock()
	var info protocol.AgentInfo
	a := f.agents[name]
	pf := f.files[name]
	switch {
	case a != nil:
		info = f.info(a)
	case pf != nil && pf.agent == "":
		info = failedFileInfo(pf)
	default:
		f.mu.RUnlock()
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q (GET /agents lists them)", name)
	}
	f.mu.RUnlock()
	if err := f.countTasks(ctx, &info); err != nil {
		return nil, err
	}
	if info.State == "removed" && info.Tasks == 0 {
		return nil, protocol.Errorf(protocol.ENOTFOUND, "no agent %q (GET /agents lists them)", name)
	}
	return &info, nil
}

func (f *Fleet) countTasks(ctx context.Context, info *protocol.AgentInfo) error {
	n, err := f.store.Agent(info.Name).CountTasks(ctx)
	info.Tasks = n
	return err
}

// info describes agent a. f.mu is held.
func (f *Fleet) info(a *agent) protocol.AgentInfo {
	info := protocol.AgentInfo{Name: a.name, Handlers: []string{}, Error: a.err, Limits: map[string]any{}}
	if a.file != "" {
		info.File = a.file
		if f.cfg.Dir != "" {
			info.File += PluginExt
		}
	}
	if d := f.defaultOne(); d == a {
		info.Default = true
	}
	b := a.build
	switch {
	case b != nil:
		info.State = "ready"
	case a.file != "":
		info.State = "failed"
	default:
		info.State = "removed"
	}
	if b == nil {
		return info
	}
	if m := b.manifest; m != nil {
		info.Version, info.Description = m.Version, m.Description
	}
	info.SHA256 = b.plugin.SHA256()
	info.ABIVersion = abi.Version
	for _, h := range []protocol.Handler{protocol.HandlerTask, protocol.HandlerStep, protocol.HandlerArtifact, protocol.HandlerDownload} {
		if b.plugin.HasHandler(h) {
			info.Handlers = append(info.Handlers, string(h))
		}
	}
	loaded := b.loadedAt.UTC()
	info.LoadedAt = &loaded
	info.Limits = b.limits.describe()
	schemes := b.schemes()
	info.ArtifactSchemes = &schemes
	info.Start = startInfo(b.plugin.Start())
	info.HTTP = b.http
	return info
}

// startInfo is how a plugin's instances start, as /agents shows it.
func startInfo(s runtime.Start) *protocol.StartInfo {
	if !s.Snapshot {
		return &protocol.StartInfo{From: "initialization", Why: s.Why}
	}
	return &protocol.StartInfo{From: "snapshot", MemoryBytes: s.MemoryBytes, Reseeded: s.Reseeded, Cached: s.Cached}
}

// failedFileInfo describes a plugin file that serves no agent.
func failedFileInfo(pf *pluginFile) protocol.AgentInfo {
	return protocol.AgentInfo{Name: pf.name, File: pf.name + PluginExt, State: "failed", Error: pf.err,
		Handlers: []string{}, Limits: map[string]any{}}
}
