package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// uuid is an id the server gave, kept as its 16 bytes: a million tasks
// take 16 MB of the soak's memory, not the 70 MB of their strings.
type uuid [16]byte

// parseUUID reads the canonical form, 8-4-4-4-12 hex digits.
func parseUUID(s string) (uuid, bool) {
	var u uuid
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	var digits [32]byte
	copy(digits[0:8], s[0:8])
	copy(digits[8:12], s[9:13])
	copy(digits[12:16], s[14:18])
	copy(digits[16:20], s[19:23])
	copy(digits[20:32], s[24:36])
	if _, err := hex.Decode(u[:], digits[:]); err != nil {
		return u, false
	}
	return u, true
}

func (u uuid) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// artifactRef is an artifact uploaded, with what it holds: size bytes made
// from seed (artifactBytes), checked on every download.
type artifactRef struct {
	id   uuid
	task uint32
	seed uint32
	size uint16
}

// ids holds the tasks and artifacts the soak has made, in the order their
// creation was answered.
type ids struct {
	mu        sync.RWMutex
	tasks     []uuid
	artifacts []artifactRef
}

func (s *ids) addTask(u uuid) {
	s.mu.Lock()
	s.tasks = append(s.tasks, u)
	s.mu.Unlock()
}

func (s *ids) addArtifact(a artifactRef) {
	s.mu.Lock()
	s.artifacts = append(s.artifacts, a)
	s.mu.Unlock()
}

func (s *ids) counts() (tasks, artifacts int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tasks), len(s.artifacts)
}

// recentTasks is how many of the newest tasks count as recent: those a
// client goes on working with after creating them.
const recentTasks = 1000

// task is a random task: one of the recentTasks newest if recent, else
// one older than those (any, while there are no more than those); its
// index and id.
func (s *ids) task(rng *rand.Rand, recent bool) (int, uuid, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.tasks)
	if n == 0 {
		return 0, uuid{}, false
	}
	i := rng.IntN(n)
	switch {
	case recent && n > recentTasks:
		i = n - 1 - rng.IntN(recentTasks)
	case !recent && n > recentTasks:
		i = rng.IntN(n - recentTasks)
	}
	return i, s.tasks[i], true
}

func (s *ids) artifact(rng *rand.Rand) (artifactRef, uuid, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.artifacts) == 0 {
		return artifactRef{}, uuid{}, false
	}
	a := s.artifacts[rng.IntN(len(s.artifacts))]
	return a, s.tasks[a.task], true
}

// artifactBytes is the content of an uploaded artifact: size printable
// bytes that seed determines, so that a download can be checked without
// keeping what was sent.
func artifactBytes(seed uint32, size int) []byte {
	b := make([]byte, size)
	x := seed | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return b
}

// load is the soak's clients and what they share.
type load struct {
	base     string // http://HOST:PORT/ap/v1
	client   *http.Client
	ids      *ids
	rec      *recorder
	fails    *failures
	mix      mix
	pageSize int
	steps    atomic.Int64
	stop     atomic.Bool
}

// boundary separates the parts of an upload's multipart body.
const boundary = "soak-boundary-7d3f9a"

// do sends one request, reads its answer and records its latency; a
// transport error or a status other than 200 is a failure. It returns the
// answer's body (in buf) when the request succeeded.
func (l *load) do(phase string, rt route, method, url, contentType string, body []byte, buf *bytes.Buffer) ([]byte, bool) {
	b, _, ok := l.timed(phase, rt, method, url, contentType, body, buf)
	return b, ok
}

// timed is do, and says how long the request took.
func (l *load) timed(phase string, rt route, method, url, contentType string, body []byte, buf *bytes.Buffer) ([]byte, time.Duration, bool) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	if err != nil {
		l.fails.add(phase, rt, err.Error())
		return nil, 0, false
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	buf.Reset()
	start := time.Now()
	res, err := l.client.Do(req)
	if err == nil {
		_, err = io.Copy(buf, io.LimitReader(res.Body, 4<<20))
		res.Body.Close()
	}
	took := time.Since(start)
	switch {
	case err != nil:
		l.rec.record(rt, took, false)
		l.fails.add(phase, rt, fmt.Sprintf("%s %s: %v", method, url, err))
		return nil, took, false
	case res.StatusCode != http.StatusOK:
		l.rec.record(rt, took, false)
		l.fails.add(phase, rt, fmt.Sprintf("%s %s: %s: %.300s", method, url, res.Status, buf.Bytes()))
		return nil, took, false
	}
	l.rec.record(rt, took, true)
	return buf.Bytes(), took, true
}

// fail records a request that answered 200 with an answer that is wrong.
func (l *load) fail(phase string, rt route, what string, body []byte) {
	l.rec.fail(rt) // its latency is recorded already
	l.fails.add(phase, rt, fmt.Sprintf("%s: %.300s", what, body))
}

// createTask creates a task and keeps its id.
func (l *load) createTask(phase string, n int64, buf *bytes.Buffer) {
	body := fmt.Appendf(nil, `{"input":"soak task %d","additional_input":{"n":%d,"from":"soak"}}`, n, n)
	b, ok := l.do(phase, createTask, http.MethodPost, l.base+"/agent/tasks", "application/json", body, buf)
	if !ok {
		return
	}
	var t struct {
		TaskID string `json:"task_id"`
	}
	u, valid := uuid{}, false
	if json.Unmarshal(b, &t) == nil {
		u, valid = parseUUID(t.TaskID)
	}
	if !valid {
		l.fail(phase, createTask, "no task_id in the answer", b)
		return
	}
	l.ids.addTask(u)
}

// mixed makes one request of the mix.
func (l *load) mixed(rng *rand.Rand, buf *bytes.Buffer) {
	const phase = "load"
	rt := l.mix.pick(rng.IntN(l.mix.total))
	if (rt == listArtifacts || rt == downloadArtifact) && !l.hasArtifacts() {
		rt = getTask // until the first upload is answered
	}
	switch rt {
	case stepRecent, stepOld:
		_, task, ok := l.ids.task(rng, rt == stepRecent)
		if !ok {
			return
		}
		if _, ok := l.do(phase, rt, http.MethodPost, l.base+"/agent/tasks/"+task.String()+"/steps", "application/json",
			[]byte(`{"input":"soak step"}`), buf); ok {
			l.steps.Add(1)
		}
	case getTask:
		_, task, ok := l.ids.task(rng, rng.IntN(2) == 0)
		if ok {
			l.do(phase, rt, http.MethodGet, l.base+"/agent/tasks/"+task.String(), "", nil, buf)
		}
	case listFirst, listLast:
		l.listPage(phase, rt, buf)
	case listSteps:
		_, task, ok := l.ids.task(rng, true)
		if ok {
			l.do(phase, rt, http.MethodGet, l.base+"/agent/tasks/"+task.String()+"/steps", "", nil, buf)
		}
	case uploadArtifact:
		l.upload(phase, rng, buf)
	case listArtifacts:
		_, task, ok := l.ids.artifact(rng)
		if !ok {
			return
		}
		if b, ok := l.do(phase, rt, http.MethodGet, l.base+"/agent/tasks/"+task.String()+"/artifacts", "", nil, buf); ok &&
			!bytes.Contains(b, []byte(`"pagination":`)) {
			l.fail(phase, rt, "a list of artifacts without pagination", b)
		}
	case downloadArtifact:
		a, task, ok := l.ids.artifact(rng)
		if !ok {
			return
		}
		b, ok := l.do(phase, rt, http.MethodGet, l.base+"/agent/tasks/"+task.String()+"/artifacts/"+a.id.String(), "", nil, buf)
		if ok && !bytes.Equal(b, artifactBytes(a.seed, int(a.size))) {
			l.fail(phase, rt, fmt.Sprintf("artifact %s: %d bytes, not the %d uploaded", a.id, len(b), a.size), nil)
		}
	}
}

func (l *load) hasArtifacts() bool {
	_, n := l.ids.counts()
	return n > 0
}

// listPage gets the first page of tasks, or the last: the page that holds
// the newest task the soak knows of (the server holds at least those).
// It checks the page's pagination, and that the last page is not empty,
// and returns how long the request took.
func (l *load) listPage(phase string, rt route, buf *bytes.Buffer) time.Duration {
	n, _ := l.ids.counts()
	page := 1
	if rt == listLast {
		page = max(1, (n+l.pageSize-1)/l.pageSize)
	}
	url := l.base + "/agent/tasks?current_page=" + strconv.Itoa(page) + "&page_size=" + strconv.Itoa(l.pageSize)
	b, took, ok := l.timed(phase, rt, http.MethodGet, url, "", nil, buf)
	if !ok {
		return took
	}
	var list struct {
		Tasks      []json.RawMessage `json:"tasks"`
		Pagination struct {
			TotalItems  int `json:"total_items"`
			TotalPages  int `json:"total_pages"`
			CurrentPage int `json:"current_page"`
		} `json:"pagination"`
	}
	switch err := json.Unmarshal(b, &list); {
	case err != nil:
		l.fail(phase, rt, "the list is not JSON: "+err.Error(), b)
	case list.Pagination.CurrentPage != page || list.Pagination.TotalItems < n || list.Pagination.TotalPages < page:
		l.fail(phase, rt, fmt.Sprintf("page %d of %d tasks: pagination %+v", page, n, list.Pagination), nil)
	case n > 0 && len(list.Tasks) == 0:
		l.fail(phase, rt, fmt.Sprintf("page %d of %d tasks is empty", page, n), b)
	}
	return took
}

// upload sends a small file, 256 bytes to 4 KiB, to one of the recent
// tasks, and keeps the artifact's id.
func (l *load) upload(phase string, rng *rand.Rand, buf *bytes.Buffer) {
	ti, task, ok := l.ids.task(rng, true)
	if !ok {
		return
	}
	seed, size := rng.Uint32(), 256+rng.IntN(4096-256+1)
	var body bytes.Buffer
	fmt.Fprintf(&body, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"soak-%08x.txt\"\r\nContent-Type: text/plain\r\n\r\n", boundary, seed)
	body.Write(artifactBytes(seed, size))
	fmt.Fprintf(&body, "\r\n--%s--\r\n", boundary)
	b, ok := l.do(phase, uploadArtifact, http.MethodPost, l.base+"/agent/tasks/"+task.String()+"/artifacts",
		"multipart/form-data; boundary="+boundary, body.Bytes(), buf)
	if !ok {
		return
	}
	var a struct {
		ArtifactID string `json:"artifact_id"`
	}
	u, valid := uuid{}, false
	if json.Unmarshal(b, &a) == nil {
		u, valid = parseUUID(a.ArtifactID)
	}
	if !valid {
		l.fail(phase, uploadArtifact, "no artifact_id in the answer", b)
		return
	}
	l.ids.addArtifact(artifactRef{id: u, task: uint32(ti), seed: seed, size: uint16(size)})
}

// runClient is one of the soak's clients: until the load stops, a paced
// create or upload when one is due (at most maxPacedInARow before a
// request of the mix, so that every route is measured even when they are
// behind), else a request of the mix, paced by mixPace if it is not nil.
func (l *load) runClient(ctx context.Context, id int, since time.Time, creates, uploads, mixPace *pacer, created *atomic.Int64) {
	const maxPacedInARow = 4
	rng := rand.New(rand.NewPCG(uint64(id), uint64(since.UnixNano())))
	var buf bytes.Buffer
	inARow := 0
	for !l.stop.Load() && ctx.Err() == nil {
		el := time.Since(since)
		if inARow < maxPacedInARow && creates.take(el) {
			l.createTask("load", created.Add(1), &buf)
			inARow++
			continue
		}
		if inARow < maxPacedInARow && uploads.take(el) {
			l.upload("load", rng, &buf)
			inARow++
			continue
		}
		inARow = 0
		if mixPace != nil && !mixPace.take(el) {
			wait := min(creates.until(el), uploads.until(el), mixPace.until(el), 10*time.Millisecond)
			time.Sleep(wait)
			continue
		}
		l.mixed(rng, &buf)
	}
}
