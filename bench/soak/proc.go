package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procStatus is what the soak reads of /proc/PID/status: the resident
// set and its parts, in bytes, the peak, and the threads.
type procStatus struct {
	VmRSS, RssAnon, RssFile, RssShmem, VmHWM uint64
	Threads                                  uint64
}

// parseStatus reads the fields of procStatus from the text of
// /proc/PID/status ("VmRSS:\t  74012 kB", "Threads:\t13"); sizes come in
// kB and are returned in bytes. A field missing is an error: a kernel
// without it (RssAnon came in Linux 4.5) cannot give the split.
func parseStatus(text string) (procStatus, error) {
	var s procStatus
	fields := map[string]*uint64{
		"VmRSS": &s.VmRSS, "RssAnon": &s.RssAnon, "RssFile": &s.RssFile, "RssShmem": &s.RssShmem,
		"VmHWM": &s.VmHWM, "Threads": &s.Threads,
	}
	seen := 0
	for line := range strings.SplitSeq(text, "\n") {
		name, value, ok := strings.Cut(line, ":")
		dst, want := fields[name]
		if !ok || !want {
			continue
		}
		value = strings.TrimSpace(value)
		unit := uint64(1)
		if v, ok := strings.CutSuffix(value, " kB"); ok {
			value, unit = strings.TrimSpace(v), 1024
		}
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return procStatus{}, fmt.Errorf("parse /proc status field %s %q: %w", name, value, err)
		}
		*dst = n * unit
		seen++
	}
	if seen != len(fields) {
		return procStatus{}, fmt.Errorf("parse /proc status: %d of the %d fields VmRSS, RssAnon, RssFile, RssShmem, VmHWM, Threads", seen, len(fields))
	}
	return s, nil
}

func readStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	return parseStatus(string(b))
}

// countFDs is how many file descriptors process pid has open.
func countFDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries), err
}

// parseCPUTicks reads the user and system CPU time, in clock ticks, from
// the text of /proc/PID/stat: fields 14 and 15, counted after the
// command's name in brackets (which may hold spaces and brackets).
func parseCPUTicks(text string) (uint64, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat: no ')' in %.80q", text)
	}
	f := strings.Fields(text[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the name", len(f))
	}
	user, err1 := strconv.ParseUint(f[11], 10, 64)
	system, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc stat: utime %q, stime %q", f[11], f[12])
	}
	return user + system, nil
}

func readCPUTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUTicks(string(b))
}

// goMetrics are the Go runtime's figures the soak reads from the server's
// /metrics, and the cache of tasks' size.
var goMetrics = []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_sys_bytes", "go_memstats_sys_bytes", "go_goroutines", "agentrt_task_cache_bytes"}

// parseMetrics reads the samples named in names from a Prometheus text
// exposition ("name value" or "name{labels} value [timestamp]"; comments
// skipped). A name absent, or given only with labels, is NaN: the soak
// reads unlabelled gauges only.
func parseMetrics(r io.Reader, names []string) (map[string]float64, error) {
	out := make(map[string]float64, len(names))
	for _, n := range names {
		out[n] = math.NaN()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if _, want := out[f[0]]; !want {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("parse metric %s value %q: %w", f[0], f[1], err)
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// dbSizes are the sizes of the store's database files, in bytes (0 for a
// file that does not exist: the -wal and -shm come and go).
func dbSizes(dataDir string) (db, wal, shm int64) {
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dataDir, name))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	return size("agentrt.db"), size("agentrt.db-wal"), size("agentrt.db-shm")
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
