// Command hostile is a test plugin, written in Go with the kit, that
// attacks the host when its step input names an attack; any other input
// is echoed, so that other tasks can be served alongside an attack.
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	agent "github.com/agentrt/agentrt/plugins/go"
)

// Raw host functions, to call with hostile arguments.

//go:wasmimport agentrt_v1 input
func rawInput(buf, capacity uint32) int32

//go:wasmimport agentrt_v1 set_result
func rawSetResult(p, n uint32) int32

//go:wasmimport agentrt_v1 log
func rawLog(level, p, n uint32) int32

//go:wasmimport agentrt_v1 artifact_create
func rawArtifactCreate(meta, metaLen, data, dataLen, idOut uint32) int32

//go:wasmimport agentrt_v1 last_error
func rawLastError(buf, capacity uint32) int32

//go:wasmimport agentrt_v1 config
func rawConfig(buf, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_read
func rawWorkspaceRead(path, pathLen, buf, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_write
func rawWorkspaceWrite(path, pathLen, data, dataLen uint32) int32

//go:wasmimport agentrt_v1 workspace_list
func rawWorkspaceList(prefix, prefixLen, buf, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_stat
func rawWorkspaceStat(path, pathLen, buf, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_delete
func rawWorkspaceDelete(path, pathLen uint32) int32

var sink [][]byte

func recurse(n int) int { return recurse(n+1) + 1 }

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		switch s.Input {
		case "loop":
			for {
			}
		case "sleep":
			time.Sleep(time.Hour)
		case "grow":
			for {
				sink = append(sink, make([]byte, 1<<20))
			}
		case "stack":
			recurse(0)
		case "output":
			return agent.Result{Output: strings.Repeat("o", 4<<20)}, nil
		case "logflood":
			for i := 0; ; i++ {
				agent.Logf("flood %d", i)
			}
		case "printflood":
			line := strings.Repeat("p", 1000) + "\n"
			for range 100000 {
				fmt.Print(line)
			}
			return agent.Result{Output: "printed 100 MB"}, nil
		case "pointers":
			return agent.Result{Output: pointerAttacks()}, nil
		case "escape":
			return agent.Result{Output: escapeAttempts()}, nil
		case "exit":
			os.Exit(7)
		case "workspace-quota":
			for i := 0; ; i++ {
				if err := agent.WriteFile(fmt.Sprintf("fill/%d", i), make([]byte, 1<<20)); err != nil {
					return agent.Result{}, err
				}
			}
		case "artifact-quota":
			for i := 0; ; i++ {
				if _, err := agent.CreateArtifact(fmt.Sprintf("a%d.txt", i), "", []byte("x")); err != nil {
					return agent.Result{}, err
				}
			}
		case "entropy":
			b := make([]byte, 16)
			rand.Read(b)
			return agent.Result{Output: fmt.Sprintf("%d %s", time.Now().Year(), hex.EncodeToString(b))}, nil
		}
		return agent.Result{Output: s.Input}, nil
	})
}

// pointerAttacks calls every host function with pointers and lengths
// outside this instance's memory and reports what each returned.
func pointerAttacks() string {
	const far, wrap, neg = 0x7fff0000, 0xfffffff0, 0xffffffff
	codes := map[string][]int32{
		"input":            {rawInput(far, 1<<20), rawInput(wrap, 1<<20)},
		"set_result":       {rawSetResult(far, 16), rawSetResult(wrap, 32), rawSetResult(16, neg)},
		"log":              {rawLog(1, far, 16), rawLog(1, wrap, 32), rawLog(1, 16, neg)},
		"artifact_create":  {rawArtifactCreate(far, 16, 0, 0, 0), rawArtifactCreate(wrap, 32, 0, 0, 0), rawArtifactCreate(16, neg, 0, 0, 0)},
		"last_error":       {rawLastError(far, 1<<20)},
		"config":           {rawConfig(far, 1<<20), rawConfig(wrap, 1<<20)},
		"workspace_read":   {rawWorkspaceRead(far, 16, 0, 0), rawWorkspaceRead(wrap, 32, 0, 0)},
		"workspace_write":  {rawWorkspaceWrite(far, 16, 0, 0), rawWorkspaceWrite(wrap, 32, 0, 0)},
		"workspace_list":   {rawWorkspaceList(far, 16, 0, 0), rawWorkspaceList(0, 0, far, 1<<20), rawWorkspaceList(0, 0, wrap, 1<<20)},
		"workspace_stat":   {rawWorkspaceStat(far, 16, 0, 0), rawWorkspaceStat(wrap, 32, 0, 0)},
		"workspace_delete": {rawWorkspaceDelete(far, 16), rawWorkspaceDelete(wrap, 32)},
	}
	b, _ := json.Marshal(codes)
	return string(b)
}

// escapeAttempts tries to reach the host through WASI and reports what it
// found.
func escapeAttempts() string {
	found := map[string]string{}
	try := func(name string, err error) {
		if err == nil {
			found[name] = "REACHED"
		} else {
			found[name] = "refused"
		}
	}
	_, err := os.ReadFile("/etc/passwd")
	try("read /etc/passwd", err)
	_, err = os.ReadDir("/")
	try("list /", err)
	_, err = os.ReadDir(".")
	try("list .", err)
	err = os.WriteFile("/tmp/agentrt-pwned", []byte("pwned"), 0o644)
	try("write /tmp", err)
	err = os.WriteFile("pwned", []byte("pwned"), 0o644)
	try("write .", err)
	wd, _ := os.Getwd()
	found["working directory"] = wd
	_, err = net.Dial("tcp", "127.0.0.1:80")
	try("dial", err)
	found["environment"] = fmt.Sprint(len(os.Environ()))
	found["arguments"] = fmt.Sprint(len(os.Args))
	b, _ := json.Marshal(found)
	return string(b)
}

func main() {}
