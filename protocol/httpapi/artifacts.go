package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

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
// The body is multipart/form-data with a "file" part and an optional
// "relative_path" field, in either order. The file streams to disk as it
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
		return protocol.Errorf(protocol.EUNPROCESSABLE, "the body must be multipart/form-data with a \"file\" part: %v", err)
	}
	var (
		fileName, relativePath string
		haveFile               bool
	)
	for {
		part, err := nextPart(mr, headers)
		if err == io.EOF {
			break
		} else if err != nil {
			return uploadReadError(err)
		}
		switch part.FormName() {
		case "file":
			if haveFile {
				return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has more than one \"file\" part")
			}
			haveFile = true
			fileName = rawFileName(part.Header.Get("Content-Disposition"))
			if _, err := protocol.CleanFileName(fileName); err != nil {
				return err // before reading the bytes
			}
			if _, err := io.Copy(up, part); err != nil {
				return uploadReadError(err)
			}
		case "relative_path":
			b, err := io.ReadAll(io.LimitReader(part, protocol.MaxPathBytes+1))
			if err != nil {
				return uploadReadError(err)
			}
			if len(b) > protocol.MaxPathBytes {
				return protocol.Errorf(protocol.EBADPATH, "relative_path is longer than %d bytes", protocol.MaxPathBytes)
			}
			relativePath = string(b)
		default:
			if _, err := io.Copy(io.Discard, part); err != nil {
				return uploadReadError(err)
			}
		}
		part.Close()
	}
	if !haveFile {
		return protocol.Errorf(protocol.EUNPROCESSABLE, "the body has no \"file\" part")
	}
	if err := paced.drain(); err != nil {
		return uploadReadError(err)
	}
	art, err := up.Commit(r.Context(), fileName, relativePath)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, art)
	return nil
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
// the artifact's exact bytes, with range requests supported.
func (s *Server) handleDownloadArtifact(w http.ResponseWriter, r *http.Request, ps httprouter.Params, a *protocol.Agent) error {
	art, f, err := a.OpenArtifact(r.Context(), ps.ByName("task_id"), ps.ByName("artifact_id"))
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", contentDisposition(art.FileName))
	h.Set("X-Content-Type-Options", "nosniff")
	// At the server's pace: a download that keeps it goes on however long
	// it takes, one the client stops reading is cut off.
	paced := s.answerWriter(w)
	defer paced.finish()
	cw := &contentErrorWriter{ResponseWriter: paced}
	http.ServeContent(cw, r, "", art.CreatedAt, f)
	if cw.status != 0 {
		h.Del("Content-Disposition")
		return cw.err()
	}
	return nil
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
