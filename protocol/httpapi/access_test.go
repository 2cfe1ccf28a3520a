package httpapi

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// readerFromWriter is a ResponseWriter whose ReadFrom says it was used:
// net/http's own sends a file with sendfile there.
type readerFromWriter struct {
	*httptest.ResponseRecorder
	readFrom bool
}

func (w *readerFromWriter) ReadFrom(r io.Reader) (int64, error) {
	w.readFrom = true
	return io.Copy(w.ResponseRecorder, r)
}

// The access log's recorder keeps the ReadFrom of the writer it wraps, so
// that downloads are still sent by the kernel, and counts what goes
// through it.
func TestTheRecorderKeepsTheWritersReadFrom(t *testing.T) {
	inner := &readerFromWriter{ResponseRecorder: httptest.NewRecorder()}
	rec := &recorder{ResponseWriter: inner}
	n, err := io.Copy(rec, io.LimitReader(strings.NewReader("artifact bytes"), 100)) // no WriteTo, as a file's
	if err != nil || n != 14 {
		t.Fatal(n, err)
	}
	if !inner.readFrom {
		t.Error("io.Copy through the recorder did not reach the writer's ReadFrom")
	}
	if rec.bytes != 14 || rec.status != 200 || inner.Body.String() != "artifact bytes" {
		t.Errorf("recorded %d bytes, status %d; body %q", rec.bytes, rec.status, inner.Body.String())
	}
}
