package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"sync"

	"github.com/agentrt/agentrt/plugins/manifest"
)

// The plugin directory ("agentrt serve"): each NAME.wasm in it, with its
// manifest NAME.json if there is one, is an agent, named NAME unless its
// manifest names it.

// pluginFile is what the fleet last made of one plugin's files.
type pluginFile struct {
	name  string   // NAME of NAME.wasm
	agent string   // the agent it serves; "" when it serves none
	key   [32]byte // of the plugin and manifest bytes last tried
	err   string   // why they could not be served
}

// loaded is what loading a plugin's files gave.
type loaded struct {
	file   string
	exists bool     // the plugin file is there
	key    [32]byte // of its bytes and its manifest's
	name   string   // the agent it is, "" when that could not be told
	build  *build
	err    error
}

// OpenDir starts the fleet on its plugin directory (Config.Dir): the
// agents that only have tasks left, then every plugin, compiled in
// parallel. The default agent takes the tasks a data directory holds
// from before agents had names. With Config.Watch it follows the
// directory from before it reads it, so that no change is missed
// between the two, until Close.
func (f *Fleet) OpenDir(ctx context.Context) error {
	if !f.cfg.Watch {
		return f.openDir(ctx)
	}
	w := &dirWatcher{dir: f.cfg.Dir, settle: f.cfg.Settle, log: f.log, rescan: func() {}}
	fw, err := w.watch()
	if err != nil {
		return err
	}
	if err := f.openDir(ctx); err != nil {
		fw.Close()
		return err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	w.changed = func(name string) { f.syncFileAsync(watchCtx, name) }
	w.rescan = func() {
		names, err := f.pluginFiles()
		if err != nil {
			f.log.Warn("plugin directory", "err", err)
		}
		for _, name := range names {
			f.syncFileAsync(watchCtx, name)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(watchCtx, fw)
	}()
	f.stopWatching = func() { cancel(); <-done; f.loads.Wait() }
	return nil
}

// openDir loads what the plugin directory holds.
func (f *Fleet) openDir(ctx context.Context) error {
	if fi, err := os.Stat(f.cfg.Dir); err != nil {
		return fmt.Errorf("plugin directory %s: %w", f.cfg.Dir, unwrapPath(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("plugin directory %s is not a directory", f.cfg.Dir)
	}
	if name := f.defaultAgent; name != "" {
		if n, err := f.store.Agent(name).AdoptTasks(ctx, ""); err != nil {
			return err
		} else if n > 0 {
			f.log.Info("the default agent takes the tasks from before agents had names", "agent", name, "tasks", n)
		}
	}
	if err := f.addRemovedAgents(ctx); err != nil {
		return err
	}
	return f.syncAll(ctx)
}

// addRemovedAgents lists the agents that have tasks in the store, so that
// their tasks stay readable while no plugin serves them.
func (f *Fleet) addRemovedAgents(ctx context.Context) error {
	names, err := f.store.AgentNames(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range names {
		if name == "" || f.agents[name] != nil {
			continue
		}
		f.agents[name] = &agent{name: name, agent: f.newAgent(name, f.log.With("agent", name))}
	}
	return nil
}

// loadFile loads the plugin file NAME of the plugin directory with its
// manifest. It compiles nothing when the files hold what was last tried
// (unchanged is then set).
func (f *Fleet) loadFile(ctx context.Context, file string) (res loaded, unchanged bool) {
	res.file = file
	wasmPath := filepath.Join(f.cfg.Dir, file+PluginExt)
	code, err := readLimited(wasmPath, f.cfg.MaxPluginBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return res, false
	}
	res.exists = true
	manifestPath := filepath.Join(f.cfg.Dir, file+ManifestExt)
	manifestBytes, merr := readLimited(manifestPath, manifest.MaxSize)
	h := sha256.New()
	h.Write(code)
	h.Write([]byte{0})
	h.Write(manifestBytes)
	copy(res.key[:], h.Sum(nil))
	f.mu.RLock()
	pf := f.files[file]
	unchanged = pf != nil && pf.key == res.key
	f.mu.RUnlock()
	if unchanged {
		return res, true
	}
	switch {
	case errors.Is(err, errTooLarge):
		res.err = fmt.Errorf("plugin %s is over the limit of %d bytes for a plugin", wasmPath, f.cfg.MaxPluginBytes)
		return res, false
	case err != nil:
		res.err = fmt.Errorf("read %s: %w", wasmPath, unwrapPath(err))
		return res, false
	}
	if err := manifest.ValidName(file); err != nil {
		res.err = fmt.Errorf("plugin file %s%s: %v", file, PluginExt, err)
		return res, false
	}
	var m *manifest.Manifest
	switch {
	case errors.Is(merr, fs.ErrNotExist):
	case merr != nil && !errors.Is(merr, errTooLarge):
		res.err = fmt.Errorf("read %s: %w", manifestPath, unwrapPath(merr))
		return res, false
	default:
		if m, err = manifest.Parse(file+ManifestExt, bytes.NewReader(manifestBytes)); err != nil {
			res.err = err
			return res, false
		}
	}
	res.name = file
	if m != nil && m.Name != "" {
		res.name = m.Name
	}
	res.build, res.err = f.newBuild(ctx, wasmPath, code, res.name, m)
	return res, false
}

// errTooLarge is a file over the size readLimited was allowed.
var errTooLarge = errors.New("file too large")

// readLimited reads a file of at most max bytes (more is errTooLarge,
// with the first max+1 bytes, enough to tell it changed).
func readLimited(path string, max int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err == nil && int64(len(b)) > max {
		err = errTooLarge
	}
	return b, err
}

// apply makes what loading a plugin's files gave the fleet's: a new build
// of its agent, a failure, or the plugin's removal.
func (f *Fleet) apply(res loaded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pf := f.files[res.file]
	if !res.exists {
		if pf == nil {
			return
		}
		if a := f.agents[pf.agent]; a != nil && a.file == res.file {
			f.log.Info("plugin removed; its agent's tasks stay readable", "agent", a.name, "file", res.file+PluginExt)
			f.retire(a, nil)
			a.file, a.err = "", ""
		}
		delete(f.files, res.file)
		return
	}
	if pf == nil {
		pf = &pluginFile{name: res.file}
		f.files[res.file] = pf
	}
	pf.key = res.key
	if res.err == nil {
		if other := f.agents[res.name]; other != nil && other.file != "" && other.file != res.file {
			res.err = fmt.Errorf("agent name %q is already served from %s%s", res.name, other.file, PluginExt)
			res.build.plugin.Close(context.Background())
		}
	}
	if res.err != nil {
		msg := res.err.Error()
		pf.err = msg
		if a := f.agents[pf.agent]; a != nil && a.file == res.file {
			a.err = msg
			if a.build != nil {
				f.log.Warn("a new build failed to load; the previous one keeps serving", "agent", a.name, "err", msg)
				return
			}
		}
		f.log.Warn("plugin failed to load", "file", res.file+PluginExt, "err", msg)
		return
	}
	if old := f.agents[pf.agent]; old != nil && pf.agent != res.name && old.file == res.file {
		// The manifest renamed the agent: the old name's agent is gone.
		f.retire(old, nil)
		old.file, old.err = "", ""
	}
	a := f.agents[res.name]
	if a == nil {
		a = &agent{name: res.name, agent: f.newAgent(res.name, f.log.With("agent", res.name))}
		f.agents[res.name] = a
	}
	pf.agent, pf.err = res.name, ""
	a.file, a.err = res.file, ""
	f.log.Info("agent ready", "agent", a.name, "file", res.file+PluginExt, "sha256", res.build.plugin.SHA256(),
		"start", res.build.plugin.Start().String())
	f.retire(a, res.build)
}

// syncFile loads a plugin's files again and applies what changed: the
// dirWatcher's callback.
func (f *Fleet) syncFile(ctx context.Context, file string) {
	res, unchanged := f.loadFile(ctx, file)
	if unchanged {
		return
	}
	f.apply(res)
	if !res.exists {
		// A plugin refused the name the removed one had may have it now.
		for _, name := range f.forgetFailed() {
			f.syncFileAsync(ctx, name)
		}
	}
}

// syncFileAsync is syncFile on a goroutine of its own: plugins that change
// together compile in parallel, while the loads of one file follow each
// other in order. f.loads counts them.
func (f *Fleet) syncFileAsync(ctx context.Context, file string) {
	mu, _ := f.fileLocks.LoadOrStore(file, &sync.Mutex{})
	f.loads.Add(1)
	go func() {
		defer f.loads.Done()
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		if ctx.Err() == nil {
			f.syncFile(ctx, file)
		}
	}()
}

// pluginFiles lists the plugin files of the directory and those the fleet
// knows of, gone or not.
func (f *Fleet) pluginFiles() ([]string, error) {
	entries, err := os.ReadDir(f.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if name := pluginName(e.Name()); name != "" && !e.IsDir() {
			seen[name] = true
		}
	}
	f.mu.RLock()
	for name := range f.files {
		seen[name] = true
	}
	f.mu.RUnlock()
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// forgetFailed returns the plugin files that serve no agent, and forgets
// what was tried of them, so that they are loaded again.
func (f *Fleet) forgetFailed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, pf := range f.files {
		if pf.agent == "" {
			pf.key = [32]byte{}
			names = append(names, pf.name)
		}
	}
	sort.Strings(names)
	return names
}

// syncAll loads every plugin of the directory, and forgets those gone: at
// start, before the watcher runs. Plugins compile in
// parallel (wazero's compilation cache makes a restart's fast); results
// are applied in file name order, so which of two files claiming one
// agent name wins does not depend on which compiled first.
func (f *Fleet) syncAll(ctx context.Context) error {
	names, err := f.pluginFiles()
	if err != nil {
		return err
	}

	type result struct {
		res       loaded
		unchanged bool
	}
	results := make([]result, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, goruntime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i].res, results[i].unchanged = f.loadFile(ctx, names[i])
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, r := range results {
		if !r.unchanged {
			f.apply(r.res)
		}
	}
	return nil
}

// unwrapPath drops the *PathError wrapper whose path the caller already
// printed.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
