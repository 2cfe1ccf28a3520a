//go:build unix

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pacedServer serves srv on real connections and tells, on ended, of
// each request whose handler has returned. Its connections' send buffers
// are small, as are the clients' receive buffers (smallBuffers): the
// kernel holds little of an answer, and what the client reads is what
// the server's writes wait for.
func pacedServer(t *testing.T, srv *Server) (ts *httptest.Server, ended <-chan string) {
	t.Helper()
	done := make(chan string, 64)
	ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		done <- r.Method + " " + r.URL.Path
	}))
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)
	ts.Client().Transport.(*http.Transport).DialContext = smallBuffers(64 << 10).DialContext
	return ts, done
}

// smallSendBuffers is a listener whose connections have a send buffer of
// 64 KiB.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(64 << 10)
	}
	return c, err
}

// smallBuffers dials with a receive buffer of (about) that many bytes, set
// before the connection's window is.
func smallBuffers(size int) *net.Dialer {
	return &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
	}}
}

// do sends a request through ts's client and returns the answer's body.
func do(t *testing.T, ts *httptest.Server, ended <-chan string, method, path, contentType string, body io.Reader) []byte {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %.200s (%v)", method, path, res.StatusCode, b, err)
	}
	<-ended
	return b
}

// bigTaskAndArtifact creates a task whose JSON answer is about size
// bytes, and gives it an artifact of size bytes.
func bigTaskAndArtifact(t *testing.T, ts *httptest.Server, ended <-chan string, size int) (taskPath, artifactPath string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"input": strings.Repeat("a", size)})
	var task struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(do(t, ts, ended, "POST", "/ap/v1/agent/tasks", "application/json", bytes.NewReader(body)), &task); err != nil {
		t.Fatal(err)
	}
	taskPath = "/ap/v1/agent/tasks/" + task.TaskID
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "big.bin")
	fw.Write(bytes.Repeat([]byte{'b'}, size))
	mw.Close()
	var art struct {
		ArtifactID string `json:"artifact_id"`
	}
	if err := json.Unmarshal(do(t, ts, ended, "POST", taskPath+"/artifacts", mw.FormDataContentType(), &form), &art); err != nil {
		t.Fatal(err)
	}
	return taskPath, taskPath + "/artifacts/" + art.ArtifactID
}

// A client that asks for an answer and never reads it, with a receive
// buffer as small as it can be: the answer stays in the server (126 MB
// pages of steps, six of them held 782 MB) for as long as the client
// likes, unless the server's write gives up. It gives up once the pace
// is missed: by BodyTimeout plus a second per MinBodyRate bytes written
// (give or take a second), whatever the answer's size. The handler
// returns, so what it held is freed, and the connection is closed.
func TestAnAnswerTheClientDoesNotReadIsCutOffAtThePace(t *testing.T) {
	const size = 8 << 20
	cfg := ServerConfig{MaxBodyBytes: 2 * size, BodyTimeout: 500 * time.Millisecond, MinBodyRate: 1 << 20}
	ts, ended := pacedServer(t, newTestServer(t, cfg))
	taskPath, artifactPath := bigTaskAndArtifact(t, ts, ended, size)
	atPace := func(n int64) time.Duration {
		return cfg.BodyTimeout + time.Duration(float64(n)/float64(cfg.MinBodyRate)*float64(time.Second)) + paceSlack
	}

	for name, path := range map[string]string{"json": taskPath, "download": artifactPath} {
		t.Run(name, func(t *testing.T) {
			conn, err := smallBuffers(1).Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: agentrt\r\n\r\n", path)
			// The handler's end is waited for as long as the whole answer
			// may take at the pace, and a few seconds more (the machine
			// may be loaded), and no longer.
			timeout := time.After(atPace(size) + 5*time.Second)
			for done := false; !done; {
				select {
				case req := <-ended:
					done = req == "GET "+path
				case <-timeout:
					t.Fatalf("the server still writes an answer nobody reads, %s after the request", time.Since(start).Round(time.Millisecond))
				}
			}
			took := time.Since(start)
			// The connection was closed with the answer cut short: what
			// the client can still read ends early.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, conn)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection stays open after the answer was cut off (%d bytes read)", n)
			}
			if n >= size {
				t.Errorf("the client read %d bytes, the whole answer: it was not cut off", n)
			}
			// It was held as long as what was sent allows, not the whole
			// answer (8 s more), give or take the time the answer took to
			// make (a loaded machine is slow to encode 8 MiB).
			if most := atPace(n + maxPacedWrite); took > most+4*time.Second {
				t.Errorf("the answer was cut off after %s; for the %d bytes the client was sent, the pace allows %s", took.Round(time.Millisecond), n, most)
			}
			t.Logf("cut off after %s; the client could read %d bytes", took.Round(time.Millisecond), n)
		})
	}
}

// A client that reads slowly, but at the pace, gets the whole answer
// however long it takes: past BodyTimeout, the deadline moves on with
// what it reads.
func TestASlowClientThatKeepsThePaceGetsTheWholeAnswer(t *testing.T) {
	const size = 4 << 20
	cfg := ServerConfig{MaxBodyBytes: 2 * size, BodyTimeout: 200 * time.Millisecond, MinBodyRate: 1 << 20}
	ts, ended := pacedServer(t, newTestServer(t, cfg))
	taskPath, artifactPath := bigTaskAndArtifact(t, ts, ended, size)

	for name, path := range map[string]string{"json": taskPath, "download": artifactPath} {
		t.Run(name, func(t *testing.T) {
			res, err := ts.Client().Get(ts.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			// About 3 MiB/s, three times the pace (a loaded machine may
			// read slower): 1.3 s for 4 MiB, long past BodyTimeout.
			start, n := time.Now(), 0
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			buf := make([]byte, 32<<10)
			for {
				<-tick.C
				m, err := io.ReadFull(res.Body, buf)
				n += m
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				} else if err != nil {
					t.Fatalf("the answer was cut off after %d bytes, %s: %v", n, time.Since(start).Round(time.Millisecond), err)
				}
			}
			<-ended
			if n < size {
				t.Errorf("read %d bytes, want at least %d", n, size)
			}
			if took := time.Since(start); took < cfg.BodyTimeout {
				t.Errorf("the answer took %s, not past BodyTimeout: the test shows nothing", took)
			}
		})
	}
}
