// Command attacker is a test plugin that speaks the ABI by hand, without
// the kit, so that every byte it hands the host is its own choice: it
// attacks the host's limits when its input names an attack, and answers
// {"output": input} otherwise, so that other tasks can be served alongside.
//
// The step input names the attack ("utf8-output", "empty-logs", ...; see
// onStep), the task input a task handler attack ("plan 349521"), the
// uploaded file's name an artifact handler attack ("block-dir.txt"), and
// the downloaded artifact's name a download handler attack
// ("dl-big.txt"; see onDownload).
//
// Built by the tests (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

//go:wasmimport agentrt_v1 input
func hostInput(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 set_result
func hostSetResult(p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 log
func hostLog(level uint32, p unsafe.Pointer, n uint32) int32

//go:wasmimport agentrt_v1 artifact_create
func hostArtifactCreate(meta unsafe.Pointer, metaLen uint32, data unsafe.Pointer, dataLen uint32, idOut unsafe.Pointer) int32

//go:wasmimport agentrt_v1 last_error
func hostLastError(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_read
func hostWorkspaceRead(path unsafe.Pointer, pathLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport agentrt_v1 workspace_write
func hostWorkspaceWrite(path unsafe.Pointer, pathLen uint32, data unsafe.Pointer, dataLen uint32) int32

//go:wasmimport agentrt_v1 workspace_delete
func hostWorkspaceDelete(path unsafe.Pointer, pathLen uint32) int32

//go:wasmimport agentrt_v1 download_write
func hostDownloadWrite(data unsafe.Pointer, dataLen uint32) int32

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func str(s string) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.StringData(s)), uint32(len(s))
}

func setResult(b []byte) int32 { return hostSetResult(ptr(b), uint32(len(b))) }

func log(msg []byte) int32 { return hostLog(1, ptr(msg), uint32(len(msg))) }

func write(path string, data []byte) int32 {
	p, n := str(path)
	return hostWorkspaceWrite(p, n, ptr(data), uint32(len(data)))
}

func remove(path string) int32 {
	p, n := str(path)
	return hostWorkspaceDelete(p, n)
}

func lastError() string {
	buf := make([]byte, 4096)
	n := hostLastError(ptr(buf), uint32(len(buf)))
	if n < 0 || int(n) > len(buf) {
		return ""
	}
	return string(buf[:n])
}

// output answers the call with {"output": s}.
func output(s string) int32 {
	b, _ := json.Marshal(map[string]string{"output": s})
	setResult(b)
	return 0
}

// fail answers the call with {"error": s} and a failing code.
func fail(s string) int32 {
	b, _ := json.Marshal(map[string]string{"error": s})
	setResult(b)
	return 1
}

type input struct {
	Task struct {
		Input *string `json:"input"`
	} `json:"task"`
	Step *struct {
		Input *string `json:"input"`
	} `json:"step"`
	Artifact *struct {
		FileName      string `json:"file_name"`
		WorkspacePath string `json:"workspace_path"`
	} `json:"artifact"`
}

func readInput() input {
	buf := make([]byte, 1<<16)
	n := hostInput(ptr(buf), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = hostInput(ptr(buf), uint32(len(buf)))
	}
	var in input
	json.Unmarshal(buf[:n], &in)
	return in
}

//go:wasmexport agentrt_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport agentrt_on_step
func onStep() int32 {
	in := readInput()
	attack := ""
	if in.Step != nil && in.Step.Input != nil {
		attack = *in.Step.Input
	}
	name, arg, _ := strings.Cut(attack, " ")
	switch name {
	// Invalid UTF-8 in every field of a result, and lone surrogates.
	case "utf8-output":
		return result(`{"output":"a` + "\xff\xfe" + `b"}`)
	case "utf8-name":
		return result(`{"output":"ok","name":"n` + "\xc0\xaf" + `"}`)
	case "utf8-key":
		return result(`{"output":"ok","additional_output":{"k` + "\xff" + `":1}}`)
	case "utf8-value":
		return result(`{"output":"ok","additional_output":{"k":"v` + "\xfe" + `"}}`)
	case "surrogate":
		return result(`{"output":"ok","additional_output":{"k":"\ud800"}}`)
	case "deep":
		return result(`{"output":"ok","additional_output":{"k":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`)
	case "raw": // the rest of the input, as the result
		return result(arg)
	case "utf8-log":
		log([]byte("bad \xff\xfe bytes"))
		return output("logged")
	case "utf8-stdout":
		os.Stdout.Write([]byte("bad \xc0\xaf bytes\n"))
		os.Stderr.Write([]byte("more \xff bytes\n"))
		return output("printed")

	// Empty log records: each costs the host a record.
	case "empty-logs":
		accepted := 0
		for range 99990 {
			if hostLog(1, nil, 0) == 0 {
				accepted++
			}
		}
		return output(strconv.Itoa(accepted))

	// Arguments of hundreds of MiB, in memory the plugin never touches.
	case "big-log", "big-meta", "big-result", "big-print":
		size, _ := strconv.Atoi(arg)
		buf := make([]byte, size) // fresh pages from memory.grow: never written
		var code int32
		switch name {
		case "big-print": // one write to stdout, no newline in it
			n, err := os.Stdout.Write(buf)
			return output(fmt.Sprintf("%d %v", n, err))
		case "big-log":
			code = hostLog(1, ptr(buf), uint32(size))
		case "big-meta":
			code = hostArtifactCreate(ptr(buf), uint32(size), nil, 0, nil)
		case "big-result":
			code = hostSetResult(ptr(buf), uint32(size))
			output("")
		}
		return output(fmt.Sprintf("%d %s", code, lastError()))

	// A big workspace file, then reads of it.
	case "write-big":
		size, _ := strconv.Atoi(arg)
		if code := write("big.bin", make([]byte, size)); code != 0 {
			return fail(fmt.Sprintf("write: %d %s", code, lastError()))
		}
		return output("written")
	case "read-big":
		size, _ := strconv.Atoi(arg)
		buf := make([]byte, size)
		p, n := str("big.bin")
		return output(strconv.Itoa(int(hostWorkspaceRead(p, n, ptr(buf), uint32(size)))))

	// Directories: a new chain of them for every file, until refused.
	case "dirs":
		files := 0
		for i := 0; ; i++ {
			path := fmt.Sprintf("d%d/%s/f", i, strings.Repeat("x/", 30))
			if code := write(path, nil); code != 0 {
				return output(fmt.Sprintf("%d files %d %s", files, code, lastError()))
			}
			files++
		}

	// Artifacts until the task's artifact bytes quota refuses one.
	case "artifact-bytes":
		size, _ := strconv.Atoi(arg)
		if code := write("chunk.bin", make([]byte, size)); code != 0 {
			return fail(fmt.Sprintf("write: %d %s", code, lastError()))
		}
		meta := []byte(`{"file_name":"chunk.bin","workspace_path":"chunk.bin"}`)
		made := 0
		for {
			if code := hostArtifactCreate(ptr(meta), uint32(len(meta)), nil, 0, nil); code != 0 {
				return output(fmt.Sprintf("%d artifacts %d %s", made, code, lastError()))
			}
			made++
		}

	// A failure message of half a megabyte.
	case "big-error":
		return fail(strings.Repeat("E", 1<<19))

	case "quick":
		return output("quick")

	// download_write outside the download handler.
	case "dl-write":
		p, n := str("not a download")
		return output(fmt.Sprintf("%d %s", hostDownloadWrite(p, n), lastError()))

	// A file at a path, for an upload to replace.
	case "write":
		if code := write(arg, []byte("old")); code != 0 {
			return fail(fmt.Sprintf("write: %d %s", code, lastError()))
		}
		return output("written")

	// A valid result of n bytes: the host keeps, decodes, stores and
	// serves it, and should give the memory back afterwards.
	case "valid-result":
		n, _ := strconv.Atoi(arg)
		b := make([]byte, 0, n+16)
		b = append(b, `{"output":"`...)
		for len(b) < n {
			b = append(b, 'r')
		}
		b = append(b, `"}`...)
		if code := setResult(b); code != 0 {
			return fail(fmt.Sprintf("set_result: %d %s", code, lastError()))
		}
		return 0
	}
	return output(attack)
}

// result sets b, byte for byte, as the result, and says what the host
// answered in the log.
func result(b string) int32 {
	p, n := str(b)
	if code := hostSetResult(p, n); code != 0 {
		log([]byte(fmt.Sprintf("set_result: %d %s", code, lastError())))
	}
	return 0
}

//go:wasmexport agentrt_on_task
func onTask() int32 {
	in := readInput()
	attack := ""
	if in.Task.Input != nil {
		attack = *in.Task.Input
	}
	name, arg, _ := strings.Cut(attack, " ")
	switch name {
	case "plan": // as many empty planned steps as asked
		n, _ := strconv.Atoi(arg)
		var b strings.Builder
		b.WriteString(`{"steps":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{}`)
		}
		b.WriteString(`]}`)
		return result(b.String())
	case "plan-utf8":
		return result(`{"steps":[{"name":"n` + "\xff" + `","input":"i` + "\xfe" + `","additional_input":{"k":"v` + "\xc0" + `"}}]}`)
	case "raw": // the rest of the input, as the result
		return result(arg)
	case "log-task": // logs n bytes from the task handler
		size, _ := strconv.Atoi(arg)
		log([]byte(strings.Repeat("t", size)))
	}
	return result(`{}`)
}

//go:wasmexport agentrt_on_artifact
func onArtifact() int32 {
	in := readInput()
	if in.Artifact == nil {
		return fail("no artifact")
	}
	path := in.Artifact.WorkspacePath
	switch strings.TrimSuffix(in.Artifact.FileName, ".txt") {
	case "block-dir", "block-dir-hang":
		// The upload's path becomes a directory that is not empty.
		remove(path)
		write(path+"/x/f", []byte("mine"))
		if strings.HasSuffix(in.Artifact.FileName, "-hang.txt") {
			for {
			}
		}
		return fail("blocked with a directory")
	case "block-parent":
		// A directory of the upload's path becomes a file.
		dir := path[:strings.LastIndexByte(path, '/')]
		remove(path)
		write(dir, []byte("mine"))
		return fail("blocked with a file")
	case "own-file":
		remove(path)
		write(path, []byte("mine"))
		return fail("replaced with its own file")
	case "log":
		log([]byte(strings.Repeat("l", 60<<10)))
	}
	return result(`{}`)
}

// onDownload attacks the host through download_write; the artifact's
// name says how. Anything else is left to the host.
//
//go:wasmexport agentrt_on_download
func onDownload() int32 {
	in := readInput()
	if in.Artifact == nil {
		return fail("no artifact")
	}
	send := func(b []byte) int32 { return hostDownloadWrite(ptr(b), uint32(len(b))) }
	name, _, _ := strings.Cut(in.Artifact.FileName, ".")
	switch name {
	case "dl-big": // one write of 200 MiB of memory never touched
		buf := make([]byte, 200<<20)
		code := send(buf)
		send([]byte(fmt.Sprintf("%d %s", code, lastError())))
		return result(`{}`)
	case "dl-fault": // a range past the plugin's memory
		code := hostDownloadWrite(unsafe.Pointer(uintptr(0xfffffff0)), 0x20)
		send([]byte(fmt.Sprintf("%d %s", code, lastError())))
		return result(`{}`)
	case "dl-limit": // 1 MiB at a time, until refused
		chunk := make([]byte, 1<<20)
		for i := range chunk {
			chunk[i] = 'L'
		}
		for {
			if code := send(chunk); code != 0 {
				log([]byte(fmt.Sprintf("refused: %d %s", code, lastError())))
				return result(`{}`)
			}
		}
	case "dl-flood": // a byte at a time, for ever
		b := []byte("f")
		for {
			send(b)
		}
	case "dl-mutate": // changes the task while serving a download
		meta := []byte(`{"file_name":"made.txt"}`)
		codes := fmt.Sprintf("%d %d %d", write("made.txt", []byte("x")), remove(in.Artifact.WorkspacePath),
			hostArtifactCreate(ptr(meta), uint32(len(meta)), nil, 0, nil))
		send([]byte(codes))
		return result(`{}`)
	}
	return result(`{"default":true}`)
}

func main() {}
