package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// handleListArtifacts serves GET /ap/v1/agent/tasks/{task_id}/artifacts.
func (s *Server) handleListArtifacts(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	p, err := pageOf(r)
	if err != nil {
		return err
	}
	list, err := a.ListArtifacts(r.Context(), ps.ByName("task_id"), p)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, list)
	return nil
}

// multipartOverhead is what a multipart body may carry beyond the file:
// boundaries, part headers, relative_path.
const multipartOverhead = 64 << 10

// handleUploadArtifact serves POST /ap/v1/agent/tasks/{task_id}/artifacts.
// The body is multipart/form-data with exactly one of a "file" part (its
// bytes) and a "uri" field (a URI artifact: a reference, of a scheme the
// agent accepts), an optional "relative_path" field and, with a uri, an
// optional "file_name", in any order. The file streams to disk as it
// arrives; memory does not grow with its size.
func (s *Server) handleUploadArtifact(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	release, err := s.uploads.acquire(r)
	if err != nil {
		return err
	}
	defer release()
	up, err := a.NewUpload(r.Context(), ps.ByName("task_id"))
	if err != nil {
		return err
	}
	defer up.Discard()

	paced := s.body(w, r, up.MaxSize()+multipartOverhead)
	headers := &partHeaders{r: paced, left: -1}
	r.Body = io.NopCloser(headers)
	mr, err := r.MultipartReader()
	if err != nil {
		return protocol.Errorf(protocol.EUNPROCESSABLE, "the body must be multipart/form-data with a \"file\" part or a \"uri\" field: %v", err)
	}
	var (
		fileName, relativePath, uri string
		haveFile, haveURI, named    bool
		havePath                    bool
	)
	both := protocol.Errorf(protocol.EUNPROCESSABLE, "the body has both a \"file\" part and a \"uri\" field; send one: a file's bytes, or a URI")
	for {
		part, err := nextPart(mr, headers)
		if err == io.EOF {
			break
		} else if err != nil {
			return uploadReadError(err)
		}
		switch part.FormName() {
		case "file":
			switch {
			case haveFile:
				return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has more than one \"file\" part")
			case haveURI:
				return both
			}
			haveFile = true
			if err := up.CheckFile(); err != nil {
				return err // before reading the bytes
			}
			fileName = rawFileName(part.Header.Get("Content-Disposition"))
			if _, err := protocol.CleanFileName(fileName); err != nil {
				return err // before reading the bytes
			}
			if _, err := io.Copy(up, part); err != nil {
				return uploadReadError(err)
			}
		case "uri":
			switch {
			case haveURI:
				return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has more than one \"uri\" field")
			case haveFile:
				return both
			}
			haveURI = true
			b, err := readField(part, "uri", protocol.MaxURIBytes)
			if err != nil {
				return err
			}
			if uri, err = up.CheckURI(string(b)); err != nil {
				return err
			}
		case "file_name":
			if named {
				// Go's FormValue and most frameworks keep the first of a
				// field given twice; reading the last would differ.
				return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has more than one \"file_name\" field")
			}
			b, err := readField(part, "file_name", protocol.MaxNameBytes)
			if err != nil {
				return err
			}
			fileName, named = string(b), true
		case "relative_path":
			if havePath {
				return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has more than one \"relative_path\" field")
			}
			havePath = true
			b, err := readField(part, "relative_path", protocol.MaxPathBytes)
			if err != nil {
				return err
			}
			relativePath = string(b)
		default:
			if _, err := io.Copy(io.Discard, part); err != nil {
				return uploadReadError(err)
			}
		}
		part.Close()
	}
	switch {
	case !haveFile && !haveURI:
		return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has no \"file\" part and no \"uri\" field; send one: a file's bytes, or a URI")
	case haveFile && named:
		return protocol.Errorf(protocol.EUNPROCESSABLE, "a \"file_name\" field goes with a \"uri\"; a file part is named by its filename")
	}
	if err := paced.drain(); err != nil {
		return uploadReadError(err)
	}
	var art *protocol.Artifact
	if haveURI {
		art, err = up.CommitURI(r.Context(), uri, fileName, relativePath)
	} else {
		art, err = up.Commit(r.Context(), fileName, relativePath)
	}
	if err != nil {
		return err
	}
	info(r).artifactIn = art.Size
	s.writeJSON(w, http.StatusOK, art)
	return nil
}

// readField reads a form field of at most max bytes; a longer one is
// refused (EBADPATH for names and paths, EUNPROCESSABLE for a URI).
func readField(part io.Reader, name string, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(part, int64(max)+1))
	if err != nil {
		return nil, uploadReadError(err)
	}
	if len(b) > max {
		code := protocol.EBADPATH
		if name == "uri" {
			code = protocol.EUNPROCESSABLE
		}
		return nil, protocol.Errorf(code, "%s is longer than %d bytes", name, max)
	}
	return b, nil
}

// uploadReadError explains a failure reading an upload's body.
func uploadReadError(err error) error {
	var tooLarge *http.MaxBytesError
	var e *protocol.Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.As(err, &tooLarge):
		return protocol.Errorf(protocol.ETOOLARGE, "the upload is larger than its limit of %d bytes", tooLarge.Limit-multipartOverhead)
	}
	return protocol.Errorf(protocol.EUNPROCESSABLE, "the multipart body is malformed or was cut short: %v", err)
}

// rawFileName is the filename of a part as the client sent it (RFC 7578,
// with RFC 5987 filename* decoded), before any cleaning.
func rawFileName(disposition string) string {
	_, params, err := mime.ParseMediaType(disposition)
	if err != nil {
		return ""
	}
	return params["filename"]
}

// handleDownloadArtifact serves GET /ap/v1/agent/tasks/{task_id}/artifacts/{artifact_id}:
// what the agent's download handler writes, if it serves the download;
// else the artifact's exact bytes, with range and conditional requests
// (ETag, the sha256 of the bytes), or, for an http or https URI
// artifact, a redirect (307) to it.
//
// A download handler's bytes go out as it writes them (chunked): if it
// fails after the first, the status is sent already, and the connection
// is closed without the body's last chunk, which every HTTP client reports
// as a body cut short (curl: "transfer closed with outstanding read data
// remaining", exit 18; Go: unexpected EOF). A failure before the first
// byte is an ordinary error answer.
func (s *Server) handleDownloadArtifact(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	dw := &downloadAnswer{s: s, w: w}
	d, err := a.DownloadArtifact(r.Context(), ps.ByName("task_id"), ps.ByName("artifact_id"), dw)
	if err != nil {
		if dw.paced != nil {
			s.cfg.Log.Warn("a download the agent served failed after it began; its connection is closed to tell the client",
				"method", r.Method, "path", r.URL.Path, "written", dw.paced.n, "err", protocol.ErrorMessage(err))
			panic(http.ErrAbortHandler)
		}
		return err
	}
	art := d.Artifact
	switch {
	case d.Served:
		dw.end(art)
		info(r).artifactOut = dw.paced.n
		return nil
	case d.Redirect != "":
		h := w.Header()
		// The Location is the URI as recorded: CleanURI let through no
		// character a header or a browser would read otherwise.
		h.Set("Location", d.Redirect)
		h.Set("Referrer-Policy", "no-referrer")
		s.writeJSON(w, http.StatusTemporaryRedirect, redirectBody{
			Message: "artifact " + art.ArtifactID + " is a URI artifact: agentrt holds none of its bytes; fetch them from its URI",
			URI:     d.Redirect,
		})
		return nil
	}
	f := d.Bytes
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", contentDisposition(art.FileName))
	h.Set("X-Content-Type-Options", "nosniff")
	if art.SHA256 != "" {
		// A strong validator: an artifact's bytes never change.
		h.Set("ETag", `"`+art.SHA256+`"`)
	}
	// At the server's pace: a download that keeps it goes on however long
	// it takes, one the client stops reading is cut off.
	paced := s.answerWriter(w)
	defer paced.finish()
	cw := &contentErrorWriter{ResponseWriter: paced}
	http.ServeContent(cw, r, "", art.CreatedAt, f)
	info(r).artifactOut = paced.n
	if cw.status != 0 {
		h.Del("Content-Disposition")
		h.Del("ETag")
		return cw.err()
	}
	return nil
}

// redirectBody is the body of a redirect to a URI artifact.
type redirectBody struct {
	Message string `json:"message"`
	URI     string `json:"uri"`
}

// downloadAnswer is the answer to a download the agent's download
// handler serves (protocol.DownloadWriter): it starts at the first byte
// the handler writes, and is written at the server's pace, each write
// ending by the handler call's deadline.
type downloadAnswer struct {
	s     *Server
	w     http.ResponseWriter
	paced *pacedAnswer // nil until the answer starts
}

func (d *downloadAnswer) start(art *protocol.Artifact) {
	h := d.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", contentDisposition(art.FileName))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Accept-Ranges", "none")
	d.paced = d.s.answerWriter(d.w)
	d.paced.WriteHeader(http.StatusOK)
}

// WriteDownload implements protocol.DownloadWriter. A host function cannot
// be stopped by the call's time limit: the write's deadline is the
// call's, or the pace's if sooner.
func (d *downloadAnswer) WriteDownload(ctx context.Context, art *protocol.Artifact, p []byte) (int, error) {
	if d.paced == nil {
		d.start(art)
	}
	if deadline, ok := ctx.Deadline(); ok {
		d.paced.cap(deadline)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := d.paced.Write(p)
	if err == nil {
		// The bytes go to the client as the handler writes them, not
		// when net/http's buffer fills: a download that fails later has
		// sent its status and what came before.
		err = d.paced.rc.Flush()
	}
	return n, err
}

// end ends a download the handler served: an empty one, if it wrote
// nothing.
func (d *downloadAnswer) end(art *protocol.Artifact) {
	if d.paced == nil {
		d.w.Header().Set("Content-Length", "0")
		d.start(art)
	}
	d.paced.cap(time.Time{})
	d.paced.finish()
}

// contentErrorWriter keeps an error http.ServeContent answers (a Range
// that names no bytes, a failed If-Match) from reaching the client as
// plain text: it records the status and text instead, for writeError to
// render as every other error.
type contentErrorWriter struct {
	http.ResponseWriter
	status int
	text   []byte
}

func (w *contentErrorWriter) WriteHeader(code int) {
	if code >= 400 {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *contentErrorWriter) Write(p []byte) (int, error) {
	if w.status != 0 {
		if room := 512 - len(w.text); room > 0 {
			w.text = append(w.text, p[:min(len(p), room)]...)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom passes r on to the writer's ReadFrom (a file is then sent by
// the kernel), unless an error was recorded.
func (w *contentErrorWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status != 0 {
		return io.Copy(writerOnly{w}, r)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{w.ResponseWriter}, r)
}

// err is the recorded error, with the code of its status.
func (w *contentErrorWriter) err() error {
	msg := strings.TrimSpace(string(w.text))
	switch w.status {
	case http.StatusRequestedRangeNotSatisfiable:
		return protocol.Errorf(protocol.ERANGE, "the requested range is not satisfiable (%s)", msg)
	case http.StatusPreconditionFailed:
		return protocol.Errorf(protocol.EPRECONDITION, "a precondition of the request failed")
	}
	return fmt.Errorf("serving an artifact: %d %s", w.status, msg)
}

// contentDisposition is an attachment header for name (RFC 6266): a quoted
// ASCII filename every client understands and, for other names, the exact
// name in RFC 5987 filename*.
func contentDisposition(name string) string {
	var ascii strings.Builder
	plain := true
	for _, r := range name {
		switch {
		case r == '"' || r == '\\':
			ascii.WriteByte('\\')
			ascii.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			ascii.WriteByte('_')
			plain = false
		default:
			ascii.WriteRune(r)
		}
	}
	v := fmt.Sprintf(`attachment; filename="%s"`, ascii.String())
	if !plain {
		v += "; filename*=UTF-8''" + strings.ReplaceAll(url.QueryEscape(name), "+", "%20")
	}
	return v
}

// handleArtifactSchemes serves GET /ap/v1/agent/artifact-schemes, from
// the artifact-management RFC: the URI schemes the agent accepts in
// uploads ("input") and may produce ("output"), "file" standing for bytes
// held by agentrt.
func (s *Server) handleArtifactSchemes(w http.ResponseWriter, r *http.Request, _ httprouter.Params, a *protocol.Agent) error {
	schemes, err := a.ArtifactSchemes()
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, schemes)
	return nil
}
