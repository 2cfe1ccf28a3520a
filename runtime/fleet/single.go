package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A fleet of one plugin ("agentrt run"): the plugin's agent, under the
// operator's limits and settings (it has no manifest), and the default
// agent. With Config.Watch ("agentrt run --dev") its file is followed
// through the plugin directory's machinery: the dirWatcher waits for the
// file to settle, the fleet loads it and swaps it in while calls in
// progress end on the old build, and a build that fails to load leaves
// the previous one serving.

// OpenPlugin starts the fleet on the one plugin at path, served as the
// agent name, which becomes the default agent and takes the tasks a data
// directory holds from before agents had names. With Config.Watch it
// follows the plugin's file, until Close, and loads each new build of it.
func (f *Fleet) OpenPlugin(ctx context.Context, path, name string) error {
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("plugin %s: %w", path, unwrapPath(err))
	} else if fi.IsDir() {
		return fmt.Errorf("plugin %s is a directory, not a .wasm file", path)
	}
	b, err := f.newBuild(ctx, path, nil, name, nil)
	if err != nil {
		return err
	}
	if n, err := f.store.Agent(name).AdoptTasks(ctx, ""); err != nil {
		b.plugin.Close(ctx)
		return err
	} else if n > 0 {
		f.log.Info("the agent takes the tasks from before agents had names", "agent", name, "tasks", n)
	}
	f.mu.Lock()
	f.defaultAgent = name
	a := &agent{name: name, file: filepath.Base(path), agent: f.newAgent(name, f.log)}
	f.agents[name] = a
	f.retire(a, b)
	f.mu.Unlock()
	if f.cfg.Watch {
		return f.watchPlugin(path, name)
	}
	return nil
}

// watchPlugin follows the plugin file path and loads each new build of it
// as agent name.
func (f *Fleet) watchPlugin(path, name string) error {
	dir, base := filepath.Split(path)
	file := pluginName(base)
	if file == "" || !strings.HasSuffix(base, PluginExt) {
		return fmt.Errorf("a plugin is reloaded when it is rebuilt only from a file named NAME%s; %s is not", PluginExt, path)
	}
	if dir == "" {
		dir = "."
	}
	ctx, cancel := context.WithCancel(context.Background())
	reload := func() { f.reloadPlugin(ctx, path, name) }
	w := &dirWatcher{dir: dir, settle: f.cfg.Settle, log: f.log, rescan: reload, changed: func(changed string) {
		if changed == file {
			reload()
		}
	}}
	fw, err := w.watch()
	if err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, fw)
	}()
	f.stopWatching = func() { cancel(); <-done }
	f.log.Info("watching the plugin file: a rebuild is loaded as soon as it is written", "file", path)
	return nil
}

// reloadPlugin loads the plugin at path again and serves it as agent
// name, unless its code is the build's already. A build that fails to load
// is logged, and the previous one keeps serving.
func (f *Fleet) reloadPlugin(ctx context.Context, path, name string) {
	code, err := readLimited(path, f.cfg.MaxPluginBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.log.Warn("the plugin file is gone; the loaded build keeps serving", "file", path)
		return
	case errors.Is(err, errTooLarge):
		f.log.Warn("the rebuilt plugin is over the limit for a plugin; the previous build keeps serving", "file", path, "limit", f.cfg.MaxPluginBytes)
		return
	case err != nil:
		f.log.Warn("reading the rebuilt plugin failed; the previous build keeps serving", "file", path, "err", err)
		return
	}
	sum := sha256.Sum256(code)
	f.mu.RLock()
	a := f.agents[name]
	same := a != nil && a.build != nil && a.build.plugin.SHA256() == hex.EncodeToString(sum[:])
	f.mu.RUnlock()
	if a == nil || same {
		return
	}
	start := time.Now()
	b, err := f.newBuild(ctx, path, code, name, nil)
	if err != nil {
		f.log.Warn("the rebuilt plugin failed to load; the previous build keeps serving", "err", err)
		return
	}
	f.mu.Lock()
	f.retire(a, b)
	f.mu.Unlock()
	f.log.Info("plugin reloaded", "agent", name, "sha256", b.plugin.SHA256()[:12], "took", time.Since(start).Round(time.Millisecond))
}
