package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// server is a running "agentrt run PLUGIN", its own process in a process
// group of its own, on a free loopback port with a fresh data directory.
type server struct {
	cmd     *exec.Cmd
	url     string // http://HOST:PORT/ap/v1
	host    string // HOST:PORT
	data    string // the data directory, removed by stop
	logPath string
	done    chan struct{}
	exitErr error
}

var urlLine = regexp.MustCompile(`msg=serving .*url=(http://\S+)`)

// startServer starts agentrt serving plugin, with a data directory and
// its log under dir, and waits until it serves.
func startServer(agentrt, plugin, dir string, flags []string) (*server, error) {
	data, err := os.MkdirTemp(dir, "agentrt-events-")
	if err != nil {
		return nil, err
	}
	logPath := data + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	args := append([]string{"run", plugin, "--addr", "127.0.0.1:0", "--data", data}, flags...)
	cmd := exec.Command(agentrt, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		os.RemoveAll(data)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(data)
		return nil, fmt.Errorf("start %s: %w", agentrt, err)
	}
	s := &server{cmd: cmd, data: data, logPath: logPath, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(s.done)
		defer logFile.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			io.WriteString(logFile, line+"\n")
			if m := urlLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		s.exitErr = cmd.Wait()
	}()
	select {
	case s.url = <-found:
		u, err := url.Parse(s.url)
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("agentrt's url %q: %w", s.url, err)
		}
		s.host = u.Host
		return s, nil
	case <-s.done:
		os.RemoveAll(data)
		return nil, fmt.Errorf("agentrt exited before it served (%v); its log: %s", s.exitErr, logPath)
	case <-time.After(2 * time.Minute):
		s.stop()
		return nil, errors.New("agentrt printed no url= line within 2 minutes; its log: " + logPath)
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM, waits up to a minute for the server to exit, then
// kills it; it removes the data directory, and the log when the server
// exited well. It says how the server ended when that was not well.
func (s *server) stop() string {
	select {
	case <-s.done:
		return fmt.Sprintf("had exited before the end: %v (log %s)", s.exitErr, s.logPath)
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	how := ""
	select {
	case <-s.done:
		if s.exitErr != nil {
			how = fmt.Sprintf("exited on SIGTERM with %v (log %s)", s.exitErr, s.logPath)
		}
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.done
		how = "killed: still running a minute after SIGTERM (log " + s.logPath + ")"
	}
	os.RemoveAll(s.data)
	if how == "" {
		os.Remove(s.logPath)
	}
	return how
}

// goroutines is the server's go_goroutines from its /metrics, -1 when
// that cannot be read.
func (s *server) goroutines() int {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get("http://" + s.host + "/metrics")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil || res.StatusCode != http.StatusOK {
		return -1
	}
	v, err := parseMetric(string(b), "go_goroutines")
	if err != nil {
		return -1
	}
	return int(v)
}

// api sends the Agent Protocol's requests the bench needs.
type api struct {
	base   string // http://HOST:PORT/ap/v1
	client *http.Client
}

func newAPI(base string, conns int) *api {
	return &api{base: base, client: &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			MaxIdleConns:        2 * conns,
			MaxIdleConnsPerHost: 2 * conns,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}}
}

// stepAnswer is what the bench reads of a step.
type stepAnswer struct {
	StepID string  `json:"step_id"`
	Status string  `json:"status"`
	Output *string `json:"output"`
}

// do sends a request with a JSON body (or none), reads the answer into
// buf, and decodes it into out when the status is want.
func (a *api) do(ctx context.Context, method, path string, body []byte, header http.Header, want int, buf *bytes.Buffer, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	buf.Reset()
	_, err = io.Copy(buf, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if res.StatusCode != want {
		return &statusError{op: method + " " + path, status: res.StatusCode, body: buf.String()}
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// statusError is an answer with a status the bench did not expect.
type statusError struct {
	op     string
	status int
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: %d %.300s", e.op, e.status, e.body)
}

func (a *api) createTask(ctx context.Context) (string, error) {
	var buf bytes.Buffer
	var t struct {
		TaskID string `json:"task_id"`
	}
	if err := a.do(ctx, http.MethodPost, "/agent/tasks", []byte(`{"input":"bench"}`), nil, http.StatusOK, &buf, &t); err != nil {
		return "", err
	}
	if t.TaskID == "" {
		return "", fmt.Errorf("create task: no task_id in %.200s", buf.String())
	}
	return t.TaskID, nil
}

var (
	preferAsync = http.Header{"Prefer": {"respond-async"}}
)

// stepBody is the JSON body of an execute-step with input.
func stepBody(input string) []byte {
	b, _ := json.Marshal(map[string]string{"input": input})
	return b
}

// syncStep executes a step and waits for its answer.
func (a *api) syncStep(ctx context.Context, task string, body []byte, buf *bytes.Buffer) (stepAnswer, error) {
	var s stepAnswer
	err := a.do(ctx, http.MethodPost, "/agent/tasks/"+task+"/steps", body, nil, http.StatusOK, buf, &s)
	return s, err
}

// asyncStep starts a step in the background: 202 and the step running.
func (a *api) asyncStep(ctx context.Context, task string, body []byte, buf *bytes.Buffer) (stepAnswer, error) {
	var s stepAnswer
	if err := a.do(ctx, http.MethodPost, "/agent/tasks/"+task+"/steps", body, preferAsync, http.StatusAccepted, buf, &s); err != nil {
		return s, err
	}
	if s.StepID == "" {
		return s, fmt.Errorf("execute step in the background: no step_id in %.200s", buf.String())
	}
	return s, nil
}

func (a *api) getStep(ctx context.Context, task, step string, buf *bytes.Buffer) (stepAnswer, error) {
	var s stepAnswer
	err := a.do(ctx, http.MethodGet, "/agent/tasks/"+task+"/steps/"+step, nil, nil, http.StatusOK, buf, &s)
	return s, err
}

// eventsPath is the path, from the host's root, of a task's events.
func (s *server) eventsPath(task string) string {
	u, _ := url.Parse(s.url)
	return filepath.ToSlash(u.Path) + "/agent/tasks/" + task + "/events"
}
