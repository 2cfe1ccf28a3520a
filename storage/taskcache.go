package storage

import (
	"bytes"
	"slices"
	"sync"

	"github.com/agentrt/agentrt/protocol"
)

// Tasks as GetTask last read them, so that a step need not query its
// task: the read was an eighth of an execute-step's server CPU, most of
// it SQLite reloading pages every commit made stale.
//
// The store owns its database (one process holds the directory's lock),
// so every change to a task goes through the writer goroutine, and every
// write says which task it changes (taskEffect): the writer brings the
// cached copy up to date after the commit (a step saved: one more step,
// more plugin time) or drops it, before the write is answered. A write
// that names no task empties the cache, so that a write that forgets to
// say costs speed, never correctness.
//
// A reader that queried the database while a write was being committed
// must not put back what it read: from the moment the writer takes a
// batch until it has settled the batch's effects, the tasks it changes
// are pending and the cache's generation moves; a reader keeps what it
// read only if the generation it saw before its query is still current
// and its task is not pending.

const (
	// maxCachedTaskBytes is the most one cached task may hold (its input,
	// additional input, metadata and artifacts, about): a larger task is
	// read each time.
	maxCachedTaskBytes = 64 << 10
)

// taskEffect is what a write does to the tasks the cache holds.
type taskEffect struct {
	// task is the task the write changes; "" for any number of tasks,
	// which empties the cache.
	task string
	// update, when set, brings a cached copy of the task up to date once
	// the write is committed; without it the copy is dropped.
	update func(*protocol.Task)
	// none: the write changes no task.
	none bool
}

// anyTasks is the effect of a write that changes tasks it does not name
// (or none): the cache is emptied.
var anyTasks = taskEffect{}

// noTasks is the effect of a write that changes no task.
var noTasks = taskEffect{none: true}

// changesTask is the effect of a write that changes the task id in a way
// the cache does not follow: its copy is dropped.
func changesTask(id string) taskEffect { return taskEffect{task: id} }

type cachedTask struct {
	agent string
	task  protocol.Task
	size  int64
}

type taskCache struct {
	// limit bounds the cached tasks' sizes together (taskSize); 0 keeps
	// none.
	limit int64
	mu    sync.Mutex
	gen   uint64
	tasks map[string]*cachedTask
	bytes int64
	// pending counts, by task, the writes being committed that change it;
	// pendingAll those that change any.
	pending    map[string]int
	pendingAll int
}

func newTaskCache(limit int64) *taskCache {
	return &taskCache{limit: limit, tasks: map[string]*cachedTask{}, pending: map[string]int{}}
}

// get returns a copy of the agent's task id if the cache holds it; else
// the generation to give put with what the query reads.
func (c *taskCache) get(agent, id string) (*protocol.Task, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.tasks[id]; e != nil && e.agent == agent {
		return copyTask(&e.task), 0
	}
	return nil, c.gen
}

// put keeps a copy of t, the agent's task as a query begun at generation
// gen read it, unless a write changed the cache since or is changing t.
func (c *taskCache) put(agent string, t *protocol.Task, gen uint64) {
	size := taskSize(t)
	if size > maxCachedTaskBytes || size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || c.pendingAll > 0 || c.pending[t.TaskID] > 0 {
		return
	}
	c.drop(t.TaskID)
	for id := range c.tasks { // room, made by dropping tasks at random
		if c.bytes+size <= c.limit {
			break
		}
		c.drop(id)
	}
	c.tasks[t.TaskID] = &cachedTask{agent: agent, task: *copyTask(t), size: size}
	c.bytes += size
}

func (c *taskCache) drop(id string) {
	if e := c.tasks[id]; e != nil {
		c.bytes -= e.size
		delete(c.tasks, id)
	}
}

// begin marks pending the tasks of writes about to be committed. Only the
// writer goroutine calls it, and end after it.
func (c *taskCache) begin(effects []taskEffect) {
	if !changesTasks(effects) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, e := range effects {
		if e.none {
			continue
		}
		if e.task == "" {
			c.pendingAll++
			clear(c.tasks)
			c.bytes = 0
			continue
		}
		c.pending[e.task]++
	}
}

// end settles the writes begin marked, errs[i] saying whether effects[i]'s
// write was committed: a committed update brings its task's copy up to
// date, anything else drops it.
func (c *taskCache) end(effects []taskEffect, errs []error) {
	if !changesTasks(effects) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for i, e := range effects {
		if e.none {
			continue
		}
		if e.task == "" {
			c.pendingAll--
			clear(c.tasks)
			c.bytes = 0
			continue
		}
		if n := c.pending[e.task] - 1; n > 0 {
			c.pending[e.task] = n
		} else {
			delete(c.pending, e.task)
		}
		cached := c.tasks[e.task]
		if cached == nil {
			continue
		}
		if errs[i] != nil || e.update == nil {
			c.drop(e.task)
			continue
		}
		e.update(&cached.task)
		c.bytes -= cached.size
		cached.size = taskSize(&cached.task)
		c.bytes += cached.size
	}
}

// changesTasks is whether any of effects changes a task: writes that
// change none (keys, say) leave the cache and its reads alone.
func changesTasks(effects []taskEffect) bool {
	for _, e := range effects {
		if !e.none {
			return true
		}
	}
	return false
}

// copyTask copies what a caller could change of t.
func copyTask(t *protocol.Task) *protocol.Task {
	c := *t
	c.Input, c.Title, c.Description, c.Version = cloneText(t.Input), cloneText(t.Title), cloneText(t.Description), cloneText(t.Version)
	c.AdditionalInput = bytes.Clone(t.AdditionalInput)
	c.Artifacts = slices.Clone(t.Artifacts)
	if c.Artifacts == nil {
		c.Artifacts = []protocol.Artifact{}
	}
	c.Logs = nil
	return &c
}

func cloneText(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// taskSize is about what a cached copy of t holds, in bytes: the heap a
// cached task of a 5-byte input took, its map entry included, was 343
// bytes (TestTheTaskCacheHoldsWhatItCounts).
func taskSize(t *protocol.Task) int64 {
	n := taskOverhead + len(t.AdditionalInput)
	for _, s := range []*string{t.Input, t.Title, t.Description, t.Version} {
		if s != nil {
			n += len(*s)
		}
	}
	for i := range t.Artifacts {
		a := &t.Artifacts[i]
		n += 256 + len(a.FileName) + len(a.RelativePath) + len(a.URI)
	}
	return int64(n)
}

// taskOverhead is what a cached task holds besides its text.
const taskOverhead = 352

// held is what the cache holds now, as taskSize counts it.
func (c *taskCache) held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
