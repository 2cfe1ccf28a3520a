package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// upload is what uploadServer received.
type upload struct {
	contentLength, bodyLength int64
	fileName, relativePath    string
	file                      []byte
	err                       error
}

// uploadServer answers uploads: it reads the multipart body and sends
// what it held to got.
func uploadServer(t *testing.T, got chan<- upload) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		u := upload{contentLength: r.ContentLength, bodyLength: int64(len(body)), err: err}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if u.err == nil {
			u.err = r.ParseMultipartForm(1 << 20)
		}
		if u.err == nil {
			u.relativePath = r.FormValue("relative_path")
			f, h, err := r.FormFile("file")
			if u.err = err; err == nil {
				u.fileName = h.Filename
				u.file, u.err = io.ReadAll(f)
			}
		}
		got <- u
		json.NewEncoder(w).Encode(Artifact{ArtifactID: "a1", FileName: u.fileName, RelativePath: &u.relativePath})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestClientUploadSendsTheFileAsMultipartWithItsExactLength(t *testing.T) {
	for _, tc := range []struct {
		name, fileName, relativePath string
		size                         int
		unknownSize                  bool
	}{
		{"with a relative path", "notes.txt", "docs/in", 1000, false},
		{"at the root", "report.md", "", 70000, false},
		{"empty", "empty", "", 0, false},
		{"a name needing quoting", `say "hi".txt`, "", 10, false},
		{"size unknown, sent chunked", "stream.bin", "x", 70000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan upload, 1)
			ts := uploadServer(t, got)
			data := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			size := int64(tc.size)
			if tc.unknownSize {
				size = -1
			}
			var mu sync.Mutex
			var last, total int64
			progress := func(done, all int64) {
				mu.Lock()
				defer mu.Unlock()
				if done < last {
					t.Errorf("progress went back from %d to %d", last, done)
				}
				last, total = done, all
			}
			art, err := mustNew(t, ts.URL).UploadArtifact(context.Background(), "t1", tc.fileName, tc.relativePath,
				bytes.NewReader(data), size, progress)
			if err != nil {
				t.Fatal(err)
			}
			u := <-got
			if u.err != nil {
				t.Fatalf("server: %v", u.err)
			}
			if u.fileName != tc.fileName || u.relativePath != tc.relativePath || !bytes.Equal(u.file, data) {
				t.Errorf("server got file %q in %q with %d bytes; want %q in %q with %d",
					u.fileName, u.relativePath, len(u.file), tc.fileName, tc.relativePath, len(data))
			}
			wantLength := u.bodyLength
			if tc.unknownSize {
				wantLength = -1
			}
			if u.contentLength != wantLength {
				t.Errorf("Content-Length %d, body %d bytes", u.contentLength, u.bodyLength)
			}
			if art.ArtifactID != "a1" || art.FileName != tc.fileName {
				t.Errorf("artifact %+v", art)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.size > 0 && (last != size && !tc.unknownSize || total != size) {
				t.Errorf("last progress %d of %d, want %d of %d", last, total, tc.size, size)
			}
		})
	}
}

// gatedReader yields first, then waits for gate before yielding rest.
type gatedReader struct {
	first, rest []byte
	gate        <-chan struct{}
	timedOut    chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if len(g.first) > 0 {
		n := copy(p, g.first)
		g.first = g.first[n:]
		return n, nil
	}
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-time.After(10 * time.Second):
			close(g.timedOut)
			return 0, io.ErrUnexpectedEOF
		}
		g.gate = nil
	}
	if len(g.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.rest)
	g.rest = g.rest[n:]
	return n, nil
}

func TestClientUploadStreamsTheFileWhileTheServerReadsIt(t *testing.T) {
	// The file's second half is held back until the server has received
	// the first: a client that read the whole file before sending it
	// would never send anything.
	first, rest := bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 64<<10)
	firstArrived := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		part, err := mr.NextPart()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if _, err := io.ReadFull(part, make([]byte, len(first))); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		close(firstArrived)
		n, err := io.Copy(io.Discard, part)
		if err != nil || n != int64(len(rest)) {
			http.Error(w, "the rest: "+strconv.FormatInt(n, 10), 400)
			return
		}
		io.WriteString(w, `{"artifact_id":"a1","agent_created":false,"file_name":"f"}`)
	}))
	defer ts.Close()
	file := &gatedReader{first: first, rest: rest, gate: firstArrived, timedOut: make(chan struct{})}
	_, err := mustNew(t, ts.URL).UploadArtifact(context.Background(), "t", "f", "", file, int64(len(first)+len(rest)), nil)
	select {
	case <-file.timedOut:
		t.Fatal("the server never received the file's first half before the client read its second")
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sizedReader yields n bytes of 'x'.
type sizedReader struct{ n int }

func (r *sizedReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestClientUploadFailsWhenTheFileIsNotTheSizeItWasSaidToBe(t *testing.T) {
	got := make(chan upload, 2)
	ts := uploadServer(t, got)
	for _, tc := range []struct {
		name       string
		have, told int64
		want       string
	}{
		{"it grew", 2000, 1000, "holds more than the 1000 bytes"},
		{"it shrank", 500, 1000, "ended after 500 of the 1000 bytes"},
	} {
		_, err := mustNew(t, ts.URL).UploadArtifact(context.Background(), "t", "f", "", &sizedReader{n: int(tc.have)}, tc.told, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// signalWriter closes got when its first bytes arrive.
type signalWriter struct {
	buf  bytes.Buffer
	got  chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.got) })
	return w.buf.Write(p)
}

func TestClientDownloadWritesBytesAsTheyArrive(t *testing.T) {
	// The server sends the rest of the file only once the client has
	// written the first part: a client that waited for the whole body
	// before writing would get nothing.
	w := &signalWriter{got: make(chan struct{})}
	stuck := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/octet-stream")
		rw.Header().Set("Content-Length", "10")
		io.WriteString(rw, "first")
		rw.(http.Flusher).Flush()
		select {
		case <-w.got:
		case <-time.After(10 * time.Second):
			close(stuck)
			return
		}
		io.WriteString(rw, "-rest")
	}))
	defer ts.Close()
	var progress []int64
	n, err := mustNew(t, ts.URL).DownloadArtifact(context.Background(), "t", "a", w, func(done, total int64) {
		if total != 10 {
			t.Errorf("progress total %d, want 10", total)
		}
		progress = append(progress, done)
	})
	select {
	case <-stuck:
		t.Fatal("the client wrote nothing before the whole body came")
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
	if n != 10 || w.buf.String() != "first-rest" {
		t.Errorf("downloaded %d bytes %q", n, w.buf.String())
	}
	if len(progress) == 0 || progress[len(progress)-1] != 10 {
		t.Errorf("progress %v, want it to end at 10", progress)
	}
}

func TestClientDownloadCutShortIsAnError(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, strings.Repeat("x", 50))
		// The handler ends: net/http closes the connection 50 bytes short.
	}))
	defer ts.Close()
	var buf bytes.Buffer
	_, err := mustNew(t, ts.URL).DownloadArtifact(context.Background(), "t", "a", &buf, nil)
	if err == nil {
		t.Fatalf("a download cut at 50 of 100 bytes succeeded")
	}
	if !strings.Contains(err.Error(), "download artifact a of task t") {
		t.Errorf("error %q does not name the artifact and task", err)
	}
}

func TestClientDownloadOfAnErrorAnswerWritesNothing(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		io.WriteString(w, `{"message":"artifact \"a\" not found","code":"not_found"}`)
	}))
	defer ts.Close()
	var buf bytes.Buffer
	_, err := mustNew(t, ts.URL).DownloadArtifact(context.Background(), "t", "a", &buf, nil)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Message != `artifact "a" not found` {
		t.Errorf("error %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("the error body was written as the artifact: %q", buf.String())
	}
}
