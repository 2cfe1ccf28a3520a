// Command bigfile uploads a big file to agentrt and downloads it again,
// measuring the server's peak resident memory above what it held before
// each transfer (the target: under 64 MiB for a 1 GiB file) and the
// throughput of each, side by side with cp of the same file on the same
// disk (the ceiling), round after round.
//
//	go run ./bench/bigfile -agentrt build/agentrt -plugin build/plugins/echo-go.wasm
//
// The server runs as its own process ("agentrt run", a fresh data
// directory under -tmp); its peak is VmHWM of /proc/PID/status, reset
// before each transfer by writing 5 to /proc/PID/clear_refs, against
// VmRSS at the reset. The upload streams the file from disk as a
// multipart body with its Content-Length; the download streams to a file,
// which is then checked byte for byte (its sha256) against the source.
// cp copies the file, and "cp + sync" also fsyncs the copy: agentrt
// fsyncs an upload before it answers, so that is the upload's ceiling.
// The four transfers run once a round, in an order that turns from round
// to round, each after a sync (so that none waits for the writeback of
// the one before). Everything it writes goes under -tmp and is removed at
// the end.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	agentrt := flag.String("agentrt", "build/agentrt", "the agentrt binary")
	plugin := flag.String("plugin", "build/plugins/echo-go.wasm", "the plugin agentrt serves")
	size := flag.Int64("size", 1<<30, "the file's size in bytes")
	rounds := flag.Int("rounds", 3, "rounds: cp, cp + sync, upload and download each once a round")
	tmp := flag.String("tmp", os.TempDir(), "where the file, its copies and the data directory go (a real disk: agentrt fsyncs)")
	flag.Parse()
	if err := run(*agentrt, *plugin, *size, *rounds, *tmp); err != nil {
		fmt.Fprintln(os.Stderr, "bigfile:", err)
		os.Exit(1)
	}
}

// measure is one transfer: how long it took, and the server's peak above
// its resident memory when it began (0 for cp).
type measure struct {
	took time.Duration
	peak uint64
}

func run(agentrt, plugin string, size int64, rounds int, tmp string) error {
	dir, err := os.MkdirTemp(tmp, "agentrt-bigfile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "src.bin")
	sum, err := makeFile(src, size)
	if err != nil {
		return err
	}
	logf("made %s: %d bytes", src, size)

	srv, err := startServer(agentrt, plugin, filepath.Join(dir, "data"), size)
	if err != nil {
		return err
	}
	defer srv.stop()
	logf("agentrt pid %d at %s, resident %s", srv.cmd.Process.Pid, srv.url, mib(srv.status("VmRSS")))

	results := map[string][]measure{}
	order := []string{"cp", "cp + sync", "upload", "download"}
	for r := 1; r <= rounds; r++ {
		// The order turns each round (a download takes the last upload's
		// artifact), and each transfer starts with nothing left to write
		// back of the one before.
		for i := range order {
			what := order[(i+r-1)%len(order)]
			if out, err := exec.Command("sync").CombinedOutput(); err != nil {
				return fmt.Errorf("sync: %v: %s", err, out)
			}
			m, err := srv.transfer(what, src, dir, size, sum)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, what, err)
			}
			results[what] = append(results[what], m)
			logf("round %d %-9s %7.1f MB/s  %6.2f s  peak +%s", r, what, mbps(size, m.took), m.took.Seconds(), mib(m.peak))
		}
	}
	report(results, size, srv)
	return nil
}

// makeFile writes size bytes that do not compress (1 MiB of random bytes,
// over and over) to path, synced, and returns their sha256.
func makeFile(path string, size int64) ([]byte, error) {
	block := make([]byte, 1<<20)
	rand.Read(block)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	for left := size; left > 0; {
		n := min(left, int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			return nil, err
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return h.Sum(nil), f.Close()
}

// server is a running "agentrt run".
type server struct {
	cmd  *exec.Cmd
	url  string
	task string
	done chan struct{}
}

var urlLine = regexp.MustCompile(`url=(http://\S+)`)

func startServer(agentrt, plugin, data string, size int64) (*server, error) {
	limit := strconv.FormatInt(2*size+(1<<20), 10) // room for the file with its framing
	cmd := exec.Command(agentrt, "run", plugin, "--addr", "127.0.0.1:0", "--data", data,
		"--max-upload", limit, "--max-workspace", limit, "--max-task-artifact-bytes", "0", "--min-free-disk", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	select {
	case s.url = <-found:
	case <-s.done:
		return nil, errors.New("agentrt exited before it served")
	case <-time.After(time.Minute):
		s.stop()
		return nil, errors.New("agentrt printed no url= line within a minute")
	}
	res, err := http.Post(s.url+"/agent/tasks", "application/json", strings.NewReader(`{"input":"big file"}`))
	if err != nil {
		s.stop()
		return nil, err
	}
	var task struct {
		TaskID string `json:"task_id"`
	}
	err = json.NewDecoder(res.Body).Decode(&task)
	res.Body.Close()
	if err != nil || task.TaskID == "" {
		s.stop()
		return nil, fmt.Errorf("create a task: %d %v", res.StatusCode, err)
	}
	s.task = task.TaskID
	return s, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// status is a field of /proc/PID/status, in bytes.
func (s *server) status(field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakSince resets the server's peak resident memory and returns how far
// above its resident memory then the peak goes until it is called.
func (s *server) peakSince() (func() uint64, error) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("reset the peak resident memory: %w", err)
	}
	base := s.status("VmRSS")
	return func() uint64 {
		if peak := s.status("VmHWM"); peak > base {
			return peak - base
		}
		return 0
	}, nil
}

var lastArtifact string // the artifact the last upload made, for the download

func (s *server) transfer(what, src, dir string, size int64, sum []byte) (measure, error) {
	dst := filepath.Join(dir, "copy.bin")
	defer os.Remove(dst)
	switch what {
	case "cp", "cp + sync":
		start := time.Now()
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			return measure{}, fmt.Errorf("cp: %v: %s", err, out)
		}
		if what == "cp + sync" {
			if out, err := exec.Command("sync", dst).CombinedOutput(); err != nil {
				return measure{}, fmt.Errorf("sync: %v: %s", err, out)
			}
		}
		return measure{took: time.Since(start)}, nil
	}
	peak, err := s.peakSince()
	if err != nil {
		return measure{}, err
	}
	start := time.Now()
	switch what {
	case "upload":
		lastArtifact, err = s.upload(src, size)
	case "download":
		err = s.download(lastArtifact, dst, size)
	}
	m := measure{took: time.Since(start), peak: peak()}
	if err != nil {
		return m, err
	}
	if what == "download" {
		if err := checkFile(dst, size, sum); err != nil {
			return m, err
		}
	}
	return m, nil
}

// upload streams the file at path as a multipart body of known length.
func (s *server) upload(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var head, tail bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", "big.bin"); err != nil {
		return "", err
	}
	fmt.Fprintf(&tail, "\r\n--%s--\r\n", mw.Boundary())
	req, err := http.NewRequestWithContext(context.Background(), "POST", s.url+"/agent/tasks/"+s.task+"/artifacts",
		io.MultiReader(bytes.NewReader(head.Bytes()), f, bytes.NewReader(tail.Bytes())))
	if err != nil {
		return "", err
	}
	req.ContentLength = int64(head.Len()) + size + int64(tail.Len())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var a struct {
		ArtifactID string `json:"artifact_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil || res.StatusCode != 200 {
		return "", fmt.Errorf("upload: status %d, %v", res.StatusCode, err)
	}
	return a.ArtifactID, nil
}

// download streams an artifact to the file at path.
func (s *server) download(artifactID, path string, size int64) error {
	res, err := http.Get(s.url + "/agent/tasks/" + s.task + "/artifacts/" + artifactID)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("download: status %d", res.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(f, res.Body)
	if err == nil && n != size {
		err = fmt.Errorf("downloaded %d bytes of %d", n, size)
	}
	return err
}

// checkFile checks that the file at path holds size bytes of sha256 sum.
func checkFile(path string, size int64, sum []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("the download is %d bytes with another sha256, not the file's %d bytes", n, size)
	}
	return nil
}

// report prints the medians of the rounds as a markdown table.
func report(results map[string][]measure, size int64, srv *server) {
	median := func(ms []measure) measure {
		sorted := append([]measure(nil), ms...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].took < sorted[j].took })
		m := sorted[len(sorted)/2]
		for _, x := range ms {
			m.peak = max(m.peak, x.peak) // the worst peak, not the median
		}
		return m
	}
	cp, cpSync := median(results["cp"]), median(results["cp + sync"])
	fmt.Printf("\n%s of %d bytes, %d rounds (median time, worst peak); server resident after: %s\n\n",
		"a file", size, len(results["cp"]), mib(srv.status("VmRSS")))
	fmt.Println("| transfer | MB/s | seconds | vs cp | vs cp + sync | server peak above its resident memory | target |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|")
	for _, what := range []string{"cp", "cp + sync", "upload", "download"} {
		m := median(results[what])
		peak, target := "—", "—"
		if what == "upload" || what == "download" {
			peak = mib(m.peak)
			target = "< 64 MiB: " + map[bool]string{true: "met", false: "NOT met"}[m.peak < 64<<20]
		}
		fmt.Printf("| %s | %.0f | %.2f | %.2f× | %.2f× | %s | %s |\n", what, mbps(size, m.took), m.took.Seconds(),
			cp.took.Seconds()/m.took.Seconds(), cpSync.took.Seconds()/m.took.Seconds(), peak, target)
	}
	fmt.Println("\nPer round (transfer, seconds, server peak):")
	for _, what := range []string{"cp", "cp + sync", "upload", "download"} {
		var parts []string
		for _, m := range results[what] {
			parts = append(parts, fmt.Sprintf("%.2f s +%s", m.took.Seconds(), mib(m.peak)))
		}
		fmt.Printf("  %-9s %s\n", what, strings.Join(parts, ", "))
	}
}

func mbps(size int64, d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "bigfile: "+format+"\n", args...) }
