package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// What a plugin directory holds for one plugin: NAME.wasm and,
// optionally, its manifest NAME.json.
const (
	PluginExt   = ".wasm"
	ManifestExt = ".json"
)

// pluginName returns the plugin a file of a plugin directory belongs
// to (its base name without .wasm or .json), or "" for a file that is no
// plugin's: another extension, or a hidden name such as the ".NAME.wasm.tmp"
// a copy-then-rename writes first.
func pluginName(file string) string {
	base := filepath.Base(file)
	if strings.HasPrefix(base, ".") {
		return ""
	}
	for _, ext := range []string{PluginExt, ManifestExt} {
		if name, ok := strings.CutSuffix(base, ext); ok && name != "" {
			return name
		}
	}
	return ""
}

// dirWatcher watches a plugin directory and reports each plugin whose
// files changed (added, replaced, removed), once they have settled.
//
// How a half-copied file is kept from being loaded: a change is reported
// only when the plugin's files look the same (existence, size and
// modification time of NAME.wasm and NAME.json) at two looks settle apart;
// a file still being written changes between them. A copy that stalls for
// longer than settle may be reported half-written: loading it then fails,
// the previous build keeps serving, and the copy's next write reports it
// again. Copying to a hidden name and renaming it into place (what "cp"
// to a temporary name and "mv" do) is never seen half-written.
//
// Events come from the kernel (fsnotify); when its queue overflows, every
// plugin is reported, as at start.
type dirWatcher struct {
	dir    string
	settle time.Duration
	log    *slog.Logger
	// changed is called, from Run's goroutine only, with the name of a
	// plugin whose files settled after a change; rescan, when events may
	// have been lost.
	changed func(name string)
	rescan  func()
}

// fileStamp is what a look at a file sees.
type fileStamp struct {
	exists bool
	size   int64
	mtime  int64
}

// pluginStamp is a look at a plugin's files.
type pluginStamp struct{ wasm, manifest fileStamp }

func (w *dirWatcher) look(name string) pluginStamp {
	stat := func(path string) fileStamp {
		fi, err := os.Stat(path)
		if err != nil {
			return fileStamp{}
		}
		return fileStamp{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return pluginStamp{
		wasm:     stat(filepath.Join(w.dir, name+PluginExt)),
		manifest: stat(filepath.Join(w.dir, name+ManifestExt)),
	}
}

// watch starts watching the directory: changes from now on are queued
// for run.
func (w *dirWatcher) watch() (*fsnotify.Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch plugin directory %s: %w", w.dir, err)
	}
	if err := fw.Add(w.dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch plugin directory %s: %w", w.dir, err)
	}
	return fw, nil
}

// run reports the changes fw sees until ctx is done, then closes fw.
func (w *dirWatcher) run(ctx context.Context, fw *fsnotify.Watcher) {
	defer fw.Close()
	w.loop(ctx, fw.Events, fw.Errors)
}

// loop turns events into settled changes.
func (w *dirWatcher) loop(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error) {
	// pending holds the last look at each plugin whose files changed and
	// have not settled yet; due carries the names whose next look is due.
	pending := map[string]pluginStamp{}
	due := make(chan string, 64)
	timers := map[string]*time.Timer{}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	schedule := func(name string) {
		if t := timers[name]; t != nil {
			t.Reset(w.settle)
			return
		}
		timers[name] = time.AfterFunc(w.settle, func() {
			select {
			case due <- name:
			case <-ctx.Done():
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if filepath.Dir(ev.Name) != filepath.Clean(w.dir) {
				continue
			}
			name := pluginName(ev.Name)
			if name == "" {
				continue
			}
			if _, ok := pending[name]; !ok {
				pending[name] = w.look(name)
			}
			schedule(name)
		case name := <-due:
			last, ok := pending[name]
			if !ok {
				continue
			}
			if now := w.look(name); now != last {
				pending[name] = now
				schedule(name)
				continue
			}
			delete(pending, name)
			delete(timers, name)
			w.changed(name)
		case err, ok := <-errs:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Warn("plugin directory: too many changes at once to follow; looking at every plugin", "dir", w.dir)
				w.rescan()
				continue
			}
			w.log.Warn("plugin directory: watching failed", "dir", w.dir, "err", err)
		}
	}
}
