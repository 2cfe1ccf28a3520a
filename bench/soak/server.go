package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a running "agentrt run", in a process group of its own (a ^C
// at the terminal stops the soak, which then stops the server and writes
// its report).
type server struct {
	cmd      *exec.Cmd
	url      string // http://HOST:PORT/ap/v1
	root     string // http://HOST:PORT
	pprof    string // http://HOST:PORT/debug/pprof/, or ""
	done     chan struct{}
	exitErr  error
	mu       sync.Mutex
	warnings int      // log lines at WARN or ERROR
	first    []string // the first few of them
}

var (
	urlLine     = regexp.MustCompile(`msg=serving .*url=(http://\S+)`)
	profileLine = regexp.MustCompile(`msg="serving the profiler" url=(http://\S+)`)
	levelLine   = regexp.MustCompile(`level=(WARN|ERROR)`)
)

// logCap bounds the server's log kept in the results.
const logCap = 4 << 20

// startServer starts agentrt, its log going to logPath, and waits for it
// to serve.
func startServer(agentrt string, args []string, logPath string) (*server, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(agentrt, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd.Stdout = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", agentrt, err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(s.done)
		defer logFile.Close()
		written := 0
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if written < logCap {
				n, _ := io.WriteString(logFile, line+"\n")
				written += n
			}
			if m := profileLine.FindStringSubmatch(line); m != nil {
				s.mu.Lock()
				s.pprof = m[1]
				s.mu.Unlock()
			}
			if m := urlLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			if levelLine.MatchString(line) {
				s.mu.Lock()
				s.warnings++
				if len(s.first) < 5 {
					s.first = append(s.first, line)
				}
				s.mu.Unlock()
			}
		}
		s.exitErr = cmd.Wait()
	}()
	select {
	case s.url = <-found:
		s.root = strings.TrimSuffix(s.url, "/ap/v1")
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("agentrt exited before it served (%v); its log: %s", s.exitErr, logPath)
	case <-time.After(2 * time.Minute):
		s.stop(10 * time.Second)
		return nil, errors.New("agentrt printed no url= line within 2 minutes; its log: " + logPath)
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) profilerURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pprof
}

// stop sends SIGTERM and waits for the server to exit, for up to grace,
// then kills it. It says how the server ended.
func (s *server) stop(grace time.Duration) string {
	select {
	case <-s.done:
		return fmt.Sprintf("had exited before the end: %v", s.exitErr)
	default:
	}
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if s.exitErr != nil {
			return fmt.Sprintf("stopped by SIGTERM in %.1f s: %v", time.Since(start).Seconds(), s.exitErr)
		}
		return fmt.Sprintf("stopped by SIGTERM in %.1f s, exit status 0", time.Since(start).Seconds())
	case <-time.After(grace):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Sprintf("killed: still running %s after SIGTERM", grace)
	}
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// saveProfile saves the server's heap profile to path, if it serves the
// profiler.
func (s *server) saveProfile(client *http.Client, path string) error {
	base := s.profilerURL()
	if base == "" {
		return errors.New("the server serves no profiler")
	}
	res, err := client.Get(base + "heap")
	if err != nil {
		return fmt.Errorf("get the heap profile: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("get the heap profile: %s", res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("save the heap profile: %w", err)
	}
	return f.Close()
}
