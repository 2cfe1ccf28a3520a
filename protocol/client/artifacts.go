package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
)

// Artifact is a file of a task, uploaded or created by the agent, as a
// server reports it.
type Artifact struct {
	ArtifactID   string `json:"artifact_id"`
	AgentCreated bool   `json:"agent_created"`
	FileName     string `json:"file_name"`
	// RelativePath is the artifact's directory in the task's workspace;
	// nil or "" for its root.
	RelativePath *string `json:"relative_path"`
	// URI is what a URI artifact (the artifact-management RFC) refers to:
	// bytes held elsewhere. "" for bytes the server holds, and from
	// servers without URI artifacts.
	URI string `json:"uri,omitempty"`
	// Source is "input" (a client's upload) or "output" (the agent's),
	// and StepID the step that made it (nil for none), when the server
	// says (agentrt does).
	Source string  `json:"source,omitempty"`
	StepID *string `json:"step_id,omitempty"`
}

// ArtifactSchemes are the URI schemes an agent accepts in uploads and may
// produce (GET /agent/artifact-schemes, from the artifact-management RFC);
// "file" stands for bytes.
type ArtifactSchemes struct {
	Input  []string `json:"input"`
	Output []string `json:"output"`
}

// ArtifactSchemes asks the server which URI schemes its agent takes and
// makes.
func (c *Client) ArtifactSchemes(ctx context.Context) (*ArtifactSchemes, error) {
	var s ArtifactSchemes
	if err := c.doJSON(ctx, "GET", "/agent/artifact-schemes", nil, &s); err != nil {
		return nil, fmt.Errorf("artifact schemes: %w", err)
	}
	return &s, nil
}

// UploadURI uploads a URI artifact to a task: a reference to bytes held
// elsewhere, which the server records and hands to its agent (POST
// /agent/tasks/{task_id}/artifacts with a "uri" field). fileName and
// relativePath may be "": the server then names it after the URI.
func (c *Client) UploadURI(ctx context.Context, taskID, uri, fileName, relativePath string) (*Artifact, error) {
	task, err := pathID("task", taskID)
	if err != nil {
		return nil, fmt.Errorf("upload URI: %w", err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range []struct{ name, value string }{{"uri", uri}, {"file_name", fileName}, {"relative_path", relativePath}} {
		if f.value != "" {
			if err := mw.WriteField(f.name, f.value); err != nil {
				return nil, fmt.Errorf("upload URI: %w", err)
			}
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("upload URI: %w", err)
	}
	res, err := c.send(ctx, func() (*http.Request, error) {
		req, err := c.newRequest(ctx, "POST", "/agent/tasks"+task+"/artifacts", bytes.NewReader(body.Bytes()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Accept", "application/json")
		return req, nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("upload URI to task %s: %w", taskID, err)
	}
	defer res.Body.Close()
	var a Artifact
	if err := decodeJSON(res.Body, &a); err != nil {
		return nil, fmt.Errorf("upload URI to task %s: %w", taskID, err)
	}
	return &a, nil
}

// TaskArtifactsListResponse is one page of a task's artifacts.
type TaskArtifactsListResponse struct {
	Artifacts  []Artifact `json:"artifacts"`
	Pagination Pagination `json:"pagination"`
}

// Progress is told how a transfer goes: the bytes moved so far, and how
// many there are in all (-1 when unknown). It is called after each chunk,
// on the goroutine moving the bytes, which need not be the caller's.
type Progress func(done, total int64)

// ListArtifacts returns one page of a task's artifacts (GET
// /agent/tasks/{task_id}/artifacts).
func (c *Client) ListArtifacts(ctx context.Context, taskID string, page Page) (*TaskArtifactsListResponse, error) {
	var l TaskArtifactsListResponse
	if err := c.getJSON(ctx, "list artifacts of task", taskID, "/artifacts", page.query(), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// AllArtifacts returns every artifact of a task, reading page after page.
func (c *Client) AllArtifacts(ctx context.Context, taskID string) ([]Artifact, error) {
	return allPages(ctx, func(ctx context.Context, p Page) ([]Artifact, Pagination, error) {
		l, err := c.ListArtifacts(ctx, taskID, p)
		if err != nil {
			return nil, Pagination{}, err
		}
		return l.Artifacts, l.Pagination, nil
	})
}

// UploadArtifact uploads r as the file fileName, in the directory
// relativePath ("" for none) of the task's workspace (POST
// /agent/tasks/{task_id}/artifacts, multipart/form-data).
//
// The body streams from r as the server reads it: memory does not grow
// with the file. When size is known (0 or more) it is sent as the body's
// Content-Length, and r must hold exactly size bytes; a file that grows
// or shrinks meanwhile fails the upload. A size of -1 sends the body
// chunked. progress, if not nil, is told of each chunk of r sent.
//
// A refused upload (Client.MaxRetries) is sent again only when r can be
// read again from where it was: when it is an io.Seeker whose Seek works
// (an *os.File of a regular file, a bytes.Reader; not a pipe). progress
// then counts again from 0. Any other r is sent once.
func (c *Client) UploadArtifact(ctx context.Context, taskID, fileName, relativePath string, r io.Reader, size int64, progress Progress) (*Artifact, error) {
	task, err := pathID("task", taskID)
	if err != nil {
		return nil, fmt.Errorf("upload artifact: %w", err)
	}
	// The framing around the file's bytes is built first, so that the
	// length of the whole body is known before it is sent.
	var framing bytes.Buffer
	mw := multipart.NewWriter(&framing)
	if relativePath != "" {
		if err := mw.WriteField("relative_path", relativePath); err != nil {
			return nil, fmt.Errorf("upload artifact %s: %w", fileName, err)
		}
	}
	if _, err := mw.CreateFormFile("file", fileName); err != nil {
		return nil, fmt.Errorf("upload artifact %s: %w", fileName, err)
	}
	head := bytes.Clone(framing.Bytes())
	framing.Reset()
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("upload artifact %s: %w", fileName, err)
	}
	tail := framing.Bytes()

	// The file can be sent again if it can be read again from here.
	seeker, replayable := r.(io.Seeker)
	var start int64
	if replayable {
		var err error
		start, err = seeker.Seek(0, io.SeekCurrent)
		replayable = err == nil
	}
	var file *uploadReader // the file as the latest sending reads it
	newReq := func() (*http.Request, error) {
		if file != nil {
			// The transport may still read the last sending's body.
			file.retire()
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("rewind the file to send it again: %w", err)
			}
		}
		file = &uploadReader{r: r, size: size, progress: progress}
		req, err := c.newRequest(ctx, "POST", "/agent/tasks"+task+"/artifacts",
			io.MultiReader(bytes.NewReader(head), file, bytes.NewReader(tail)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Accept", "application/json")
		if size >= 0 {
			req.ContentLength = int64(len(head)) + size + int64(len(tail))
		}
		return req, nil
	}
	again := func(e *Error) bool { return notRecorded(e) && replayable && file.failure() == nil }
	res, err := c.send(ctx, newReq, again)
	if err == nil {
		defer res.Body.Close()
		var a Artifact
		if err = decodeJSON(res.Body, &a); err == nil {
			return &a, nil
		}
	}
	if file == nil {
		return nil, fmt.Errorf("upload artifact %s: %w", fileName, err)
	}
	if ferr := file.failure(); ferr != nil {
		err = ferr // what went wrong reading the file, not how the transport reported it
	}
	return nil, fmt.Errorf("upload artifact %s to task %s: %w", fileName, taskID, err)
}

// uploadReader reads an upload's file, holding it to its size and telling
// progress of each chunk. The transport reads it on a goroutine of its
// own, which may outlive the request's answer: retire ends its reading
// before the file is read again for another sending.
type uploadReader struct {
	r        io.Reader
	size     int64 // -1: unknown
	done     int64
	progress Progress

	reading sync.Mutex // held by Read, and by retire
	retired bool

	mu  sync.Mutex
	err error // the file's own failure, if any
}

// errRetired is what the body of a sending that was replaced reads.
var errRetired = errors.New("the upload is being sent again")

// retire waits for a Read in progress and makes every later one fail.
func (u *uploadReader) retire() {
	u.reading.Lock()
	defer u.reading.Unlock()
	u.retired = true
}

func (u *uploadReader) Read(p []byte) (int, error) {
	u.reading.Lock()
	defer u.reading.Unlock()
	if u.retired {
		return 0, errRetired
	}
	if u.size >= 0 && u.done >= u.size {
		// Whatever follows the promised bytes would be cut from the body
		// unseen: make sure there is none.
		var one [1]byte
		if n, _ := io.ReadFull(u.r, one[:]); n > 0 {
			return 0, u.fail(fmt.Errorf("the file holds more than the %d bytes it had when the upload began", u.size))
		}
		return 0, io.EOF
	}
	if u.size >= 0 && int64(len(p)) > u.size-u.done {
		p = p[:u.size-u.done]
	}
	n, err := u.r.Read(p)
	u.done += int64(n)
	if n > 0 && u.progress != nil {
		u.progress(u.done, u.size)
	}
	switch {
	case err == io.EOF && u.size >= 0 && u.done < u.size:
		return n, u.fail(fmt.Errorf("the file ended after %d of the %d bytes it had when the upload began", u.done, u.size))
	case err != nil && err != io.EOF:
		return n, u.fail(fmt.Errorf("read the file: %w", err))
	}
	return n, err
}

func (u *uploadReader) fail(err error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.err = err
	return err
}

// failure is what went wrong reading the file, if anything.
func (u *uploadReader) failure() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// DownloadArtifact writes the bytes of an artifact to w as they arrive
// (GET /agent/tasks/{task_id}/artifacts/{artifact_id}) and returns how
// many there were. progress, if not nil, is told of each chunk written.
// A transfer cut short is an error, whatever reached w by then. A
// redirect (agentrt's answer for a URI artifact) is not followed: it is
// a *RedirectError, and nothing is fetched from where it leads.
func (c *Client) DownloadArtifact(ctx context.Context, taskID, artifactID string, w io.Writer, progress Progress) (int64, error) {
	task, err := pathID("task", taskID)
	if err == nil {
		var art string
		if art, err = pathID("artifact", artifactID); err == nil {
			var n int64
			if n, err = c.download(ctx, "/agent/tasks"+task+"/artifacts"+art, w, progress); err == nil {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("download artifact %s of task %s: %w", artifactID, taskID, err)
}

// download is sent again after refusals (retry.go): they come before any
// byte reaches w.
func (c *Client) download(ctx context.Context, path string, w io.Writer, progress Progress) (int64, error) {
	hc := *c.httpClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.exchange(ctx, &hc, func() (*http.Request, error) {
		req, err := c.newRequest(ctx, "GET", path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/octet-stream")
		return req, nil
	}, nil)
	if err != nil {
		return 0, err
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		res.Body.Close()
		return 0, &RedirectError{Status: res.StatusCode, Location: res.Header.Get("Location")}
	}
	defer res.Body.Close()
	total := res.ContentLength
	body := io.Reader(res.Body)
	if progress != nil {
		body = &progressReader{r: res.Body, total: total, progress: progress}
	}
	n, err := io.Copy(w, body)
	if err != nil {
		return n, err
	}
	if total >= 0 && n != total {
		return n, fmt.Errorf("the server sent %d of the %d bytes it announced", n, total)
	}
	return n, nil
}

// RedirectError is a download the server answered with a redirect: for
// agentrt, a URI artifact, whose bytes it does not hold.
type RedirectError struct {
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("the server redirects (%d) to %s: a URI artifact, not fetched", e.Status, e.Location)
}

// progressReader tells progress of each chunk read through it.
type progressReader struct {
	r        io.Reader
	done     int64
	total    int64
	progress Progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.done += int64(n)
		p.progress(p.done, p.total)
	}
	return n, err
}
