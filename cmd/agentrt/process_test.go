package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is a real agentrt process.
type process struct {
	t      testing.TB
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
}

var urlLine = regexp.MustCompile(`url=(http://\S+)/ap/v1`)

// startProcess runs "agentrt run plugin --data dataDir --addr 127.0.0.1:0"
// and waits until it serves.
func startProcess(t testing.TB, plugin, dataDir string, extra ...string) *process {
	t.Helper()
	args := append([]string{"run", plugin, "--data", dataDir, "--addr", "127.0.0.1:0",
		"--cache", filepath.Join(buildDir, "cache")}, extra...)
	p := &process{t: t, cmd: exec.Command(agentrtBinary(t), args...), exited: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case p.url = <-ready:
		return p
	case <-p.exited:
		t.Fatalf("agentrt exited before serving:\n%s", p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("agentrt did not serve within a minute:\n%s", p.log())
	}
	return nil
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// kill stops the process with SIGKILL, as a crash or the OOM killer would.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the process to shut down (SIGTERM) and waits for it.
func (p *process) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("agentrt did not stop on SIGTERM:\n%s", p.log())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("agentrt exited with %d on SIGTERM:\n%s", code, p.log())
	}
}

func (p *process) do(method, path, contentType, body string) *response {
	p.t.Helper()
	return doRequest(p.t, p.url, method, path, contentType, strings.NewReader(body))
}

func TestStartupErrorsAreOneClearLine(t *testing.T) {
	bin := agentrtBinary(t)
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "notes.wasm")
	os.WriteFile(notWasm, []byte("this is text, not WebAssembly\n"), 0o644)
	aFile := filepath.Join(dir, "a-file")
	os.WriteFile(aFile, nil, 0o644)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busyData := t.TempDir()
	startProcess(t, watPlugin(t, "minimal"), busyData)

	good := watPlugin(t, "minimal")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing plugin", []string{"run", filepath.Join(dir, "missing.wasm")}, "no such file or directory"},
		{"plugin is a directory", []string{"run", dir}, "is a directory"},
		{"not wasm", []string{"run", notWasm}, "is not a WebAssembly module"},
		{"missing step export", []string{"run", watPlugin(t, "no_step")}, "does not export agentrt_on_step"},
		{"other ABI version", []string{"run", watPlugin(t, "abi_v2")}, "built for ABI version 2; this agentrt serves ABI version 1"},
		{"unknown import", []string{"run", watPlugin(t, "unknown_import")}, `imports env.open_socket, but the host provides no module "env"`},
		{"command module", []string{"run", watPlugin(t, "command")}, "is a command module"},
		{"initialization traps", []string{"run", watPlugin(t, "init_trap")}, "initialization failed: the plugin trapped: in _initialize: wasm error: unreachable"},
		{"initialization loops", []string{"run", watPlugin(t, "init_loop"), "--call-timeout", "300ms"}, "initialization failed: the plugin ran past its time limit of 300ms"},
		{"port taken", []string{"run", good, "--addr", held.Addr().String()}, "address already in use"},
		{"data dir not writable", []string{"run", good, "--data", filepath.Join(aFile, "data")}, "not a directory"},
		{"data dir in use", []string{"run", good, "--data", busyData}, "in use by another agentrt process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !contains(args, "--data") {
				args = append(args, "--data", filepath.Join(t.TempDir(), "data"))
			}
			if !contains(args, "--addr") {
				args = append(args, "--addr", "127.0.0.1:0")
			}
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("agentrt kept running:\n%s", stderr.String())
			}
			if cmd.ProcessState.ExitCode() != 1 {
				t.Errorf("exit code %d, want 1", cmd.ProcessState.ExitCode())
			}
			out := strings.TrimSuffix(stderr.String(), "\n")
			if strings.Contains(out, "\n") || !strings.HasPrefix(out, "agentrt: ") || !strings.Contains(out, tc.want) {
				t.Errorf("stderr = %q, want one line \"agentrt: ...%s...\"", stderr.String(), tc.want)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestCommandLine(t *testing.T) {
	bin := agentrtBinary(t)
	for _, tc := range []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{[]string{"version"}, 0, "agentrt 0.1.0 (plugin ABI 1", ""},
		{[]string{"--help"}, 0, "agentrt run PLUGIN.wasm", ""},
		{[]string{"help"}, 0, "agentrt run PLUGIN.wasm", ""},
		{[]string{"run", "--help"}, 0, "", "-max-upload"},
		{[]string{}, 2, "", "no command given"},
		{[]string{"serve-all"}, 2, "", `unknown command "serve-all"`},
		{[]string{"run"}, 2, "", "run needs the path of a plugin"},
		{[]string{"run", "a.wasm", "b.wasm"}, 2, "", "run serves one plugin; got 2"},
		{[]string{"run", "a.wasm", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"run", "a.wasm", "--max-upload", "lots"}, 2, "", "want a size such as"},
		{[]string{"run", "a.wasm", "--memory", "1B"}, 2, "", "bad -memory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.inStdout) || !strings.Contains(stderr.String(), tc.inStderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", stdout.String(), stderr.String(), tc.inStdout, tc.inStderr)
			}
		})
	}
}

func TestFlagsGoBeforeOrAfterThePlugin(t *testing.T) {
	for _, args := range [][]string{
		{"p.wasm", "--addr", "1.2.3.4:5", "--data", "d"},
		{"--addr", "1.2.3.4:5", "p.wasm", "--data", "d"},
		{"--addr=1.2.3.4:5", "--data=d", "p.wasm"},
		{"-addr", "1.2.3.4:5", "-data", "d", "--", "p.wasm"},
	} {
		cfg, err := parseRunFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if cfg.plugin != "p.wasm" || cfg.addr != "1.2.3.4:5" || cfg.dataDir != "d" {
			t.Errorf("%q parsed to plugin %q addr %q data %q", args, cfg.plugin, cfg.addr, cfg.dataDir)
		}
	}
	cfg, err := parseRunFlags([]string{"p.wasm"}, io.Discard)
	if err != nil || cfg.addr != "127.0.0.1:8000" || cfg.dataDir != "./agentrt-data" {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	cfg, err = parseRunFlags([]string{"p.wasm", "--max-upload", "2GiB", "--memory", "64MiB", "--max-body", "512KiB"}, io.Discard)
	if err != nil || cfg.limits.MaxUploadBytes != 2<<30 || cfg.memoryLimit != 64<<20 || cfg.maxBody != 512<<10 {
		t.Errorf("sizes: %+v, %v", cfg, err)
	}
}

// snapshot reads everything a client can see of the server: every task,
// step, artifact (with its bytes) and log, as text to compare.
func snapshot(t *testing.T, base string) string {
	t.Helper()
	var out strings.Builder
	get := func(path string) []byte {
		res := doRequest(t, base, "GET", path, "", nil).want(t, 200)
		return res.body
	}
	for page := 1; ; page++ {
		var list struct {
			Tasks []struct {
				TaskID string `json:"task_id"`
			}
		}
		body := get(fmt.Sprintf("/ap/v1/agent/tasks?page_size=100&current_page=%d", page))
		fmt.Fprintf(&out, "%s\n", body)
		(&response{body: body}).decode(t, &list)
		if len(list.Tasks) == 0 {
			break
		}
		for _, task := range list.Tasks {
			prefix := "/ap/v1/agent/tasks/" + task.TaskID
			fmt.Fprintf(&out, "%s\n%s\n", get(prefix), get(prefix+"/logs"))
			var steps struct {
				Steps []struct {
					StepID string `json:"step_id"`
				}
			}
			body := get(prefix + "/steps?page_size=100")
			fmt.Fprintf(&out, "%s\n", body)
			(&response{body: body}).decode(t, &steps)
			for _, s := range steps.Steps {
				fmt.Fprintf(&out, "%s\n%s\n", get(prefix+"/steps/"+s.StepID), get(prefix+"/steps/"+s.StepID+"/logs"))
			}
			var arts struct {
				Artifacts []struct {
					ArtifactID string `json:"artifact_id"`
				}
			}
			body = get(prefix + "/artifacts?page_size=100")
			fmt.Fprintf(&out, "%s\n", body)
			(&response{body: body}).decode(t, &arts)
			for _, a := range arts.Artifacts {
				fmt.Fprintf(&out, "%x\n", sha256Of(get(prefix+"/artifacts/"+a.ArtifactID)))
			}
		}
	}
	return out.String()
}

func TestRestartKeepsEverything(t *testing.T) {
	data := t.TempDir()
	plugin := examplePlugin(t, "washington-go")
	p := startProcess(t, plugin, data)
	for i := range 3 {
		var task struct {
			TaskID string `json:"task_id"`
		}
		p.do("POST", "/ap/v1/agent/tasks", "application/json",
			fmt.Sprintf(`{"input":"task %d","additional_input":{"i":%d,"nested":{"a":[1,"x",null]}}}`, i, i)).want(t, 200).decode(t, &task)
		prefix := "/ap/v1/agent/tasks/" + task.TaskID
		p.do("POST", prefix+"/steps", "", `{"input":"Write the word Washington to a .txt file"}`).want(t, 200)
		p.do("POST", prefix+"/steps", "", `{"input":"something else","additional_input":{"k":"v"}}`).want(t, 200)
		ct, body := multipartBody(t, part{name: "relative_path", value: "in/dir"},
			part{name: "file", fileName: fmt.Sprintf("upload-%d-é.bin", i), value: strings.Repeat("\x00\xff", 5000+i)})
		doRequest(t, p.url, "POST", prefix+"/artifacts", ct, body).want(t, 200)
	}
	before := snapshot(t, p.url)
	p.stop()

	p = startProcess(t, plugin, data)
	if after := snapshot(t, p.url); after != before {
		t.Errorf("after a restart the server shows\n%s\nwant\n%s", after, before)
	}
}

// tryRequest is a request that may fail (the server is being killed).
func tryRequest(client *http.Client, base, method, path, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func TestKill9LosesNothingAcknowledged(t *testing.T) {
	data := t.TempDir()
	plugin := examplePlugin(t, "washington-go")
	p := startProcess(t, plugin, data)

	type ack struct {
		path   string // where to read it back
		want   string // a JSON fragment the body must contain, or the sha256 of an artifact's bytes
		sha256 bool
	}
	var (
		mu   sync.Mutex
		acks []ack
	)
	record := func(a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				input := fmt.Sprintf("worker %d item %d: write Washington", w, i)
				code, body, err := tryRequest(client, p.url, "POST", "/ap/v1/agent/tasks", "", strings.NewReader(`{"input":"`+input+`"}`))
				if err != nil || code != 200 {
					return
				}
				var task struct {
					TaskID string `json:"task_id"`
				}
				json.Unmarshal(body, &task)
				prefix := "/ap/v1/agent/tasks/" + task.TaskID
				record(ack{path: prefix, want: `"input":"` + input + `"`})

				code, body, err = tryRequest(client, p.url, "POST", prefix+"/steps", "", strings.NewReader(`{"input":"`+input+`"}`))
				if err != nil || code != 200 {
					return
				}
				var step struct {
					StepID    string `json:"step_id"`
					Artifacts []struct {
						ArtifactID string `json:"artifact_id"`
					}
				}
				json.Unmarshal(body, &step)
				record(ack{path: prefix + "/steps/" + step.StepID, want: `"is_last":true`})
				record(ack{path: prefix + "/artifacts/" + step.Artifacts[0].ArtifactID, want: fmt.Sprintf("%x", sha256Of([]byte("Washington"))), sha256: true})

				content := make([]byte, 64<<10)
				rand.Read(content)
				ct, mp, err := buildMultipart(part{name: "file", fileName: "up.bin", value: string(content)})
				if err != nil {
					return
				}
				code, body, err = tryRequest(client, p.url, "POST", prefix+"/artifacts", ct, mp)
				if err != nil || code != 200 {
					return
				}
				var art struct {
					ArtifactID string `json:"artifact_id"`
				}
				json.Unmarshal(body, &art)
				record(ack{path: prefix + "/artifacts/" + art.ArtifactID, want: fmt.Sprintf("%x", sha256Of(content)), sha256: true})
			}
		}()
	}
	// The workers write on until the kill; it comes once they have had a
	// good number of writes acknowledged.
	const enough = 40
	eventually(t, time.Minute, fmt.Sprintf("%d acknowledged writes", enough), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= enough
	})

	// An upload cut off by the crash: its bytes are being staged when the
	// process dies.
	var victim struct {
		TaskID string `json:"task_id"`
	}
	p.do("POST", "/ap/v1/agent/tasks", "", `{}`).want(t, 200).decode(t, &victim)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ct, mp := multipartBody(t, part{name: "file", fileName: "half.bin", value: strings.Repeat("h", 4<<20)})
	fmt.Fprintf(conn, "POST /ap/v1/agent/tasks/%s/artifacts HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		victim.TaskID, ct, mp.Len())
	conn.Write(mp.Bytes()[:mp.Len()/2])
	// The workers' uploads are 64 KiB: a staged file past 1 MiB is this one.
	eventually(t, time.Minute, "the cut-off upload's bytes being staged", func() bool {
		entries, _ := os.ReadDir(filepath.Join(data, "staging"))
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.Size() >= 1<<20 {
				return true
			}
		}
		return false
	})

	p.kill()
	close(stop)
	wg.Wait()

	p = startProcess(t, plugin, data)
	for _, a := range acks {
		res := p.do("GET", a.path, "", "")
		if res.status != 200 {
			t.Errorf("acknowledged %s is gone after kill -9: %d %s", a.path, res.status, res.body)
			continue
		}
		got := string(res.body)
		if a.sha256 {
			got = fmt.Sprintf("%x", sha256Of(res.body))
		}
		if !strings.Contains(got, a.want) {
			t.Errorf("acknowledged %s reads back as %.200s, want %s", a.path, got, a.want)
		}
	}
	var arts struct {
		Artifacts []any
	}
	p.do("GET", "/ap/v1/agent/tasks/"+victim.TaskID+"/artifacts", "", "").want(t, 200).decode(t, &arts)
	if len(arts.Artifacts) != 0 {
		t.Errorf("the cut-off upload left artifacts: %+v", arts.Artifacts)
	}
	staged, _ := os.ReadDir(filepath.Join(data, "staging"))
	if len(staged) != 0 {
		t.Errorf("staging holds %d files after recovery", len(staged))
	}
	t.Logf("%d acknowledged writes survived kill -9", len(acks))
}
