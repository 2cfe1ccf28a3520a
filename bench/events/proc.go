package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// procStatus is what the bench reads of /proc/PID/status: the resident
// set and its parts, in bytes, and the threads.
type procStatus struct {
	VmRSS, RssAnon, RssFile, RssShmem uint64
	Threads                           uint64
}

// parseStatus reads the fields of procStatus from the text of
// /proc/PID/status ("VmRSS:\t  74012 kB", "Threads:\t13"); sizes come in
// kB and are returned in bytes. A field missing is an error: a kernel
// without it (RssAnon came in Linux 4.5) cannot give the split.
func parseStatus(text string) (procStatus, error) {
	var s procStatus
	fields := map[string]*uint64{
		"VmRSS": &s.VmRSS, "RssAnon": &s.RssAnon, "RssFile": &s.RssFile, "RssShmem": &s.RssShmem, "Threads": &s.Threads,
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
		return procStatus{}, fmt.Errorf("parse /proc status: %d of the %d fields VmRSS, RssAnon, RssFile, RssShmem, Threads", seen, len(fields))
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

// parseOpenFilesLimit reads the soft and hard limits of open files from
// the text of /proc/PID/limits ("Max open files  20000  20000  files").
func parseOpenFilesLimit(text string) (soft, hard string, err error) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				break
			}
			return f[0], f[1], nil
		}
	}
	return "", "", fmt.Errorf("parse /proc limits: no \"Max open files\" line")
}

func openFilesLimit(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	soft, hard, err := parseOpenFilesLimit(string(b))
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	return soft + " (hard " + hard + ")"
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

// parseTCPMemPages reads the pages the kernel holds for TCP sockets, all
// processes' together, from the text of /proc/net/sockstat ("TCP: inuse
// 5 orphan 0 tw 0 alloc 7 mem 1"): memory outside every process's RSS.
func parseTCPMemPages(text string) (uint64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				return strconv.ParseUint(f[i+1], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("parse /proc/net/sockstat: no TCP mem")
}

// tcpMem is the kernel's TCP memory in bytes, 0 when it cannot be read.
func tcpMem() uint64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	n, err := parseTCPMemPages(string(b))
	if err != nil {
		return 0
	}
	return n * uint64(os.Getpagesize())
}

// clockTicks is the kernel's clock ticks a second, in which /proc/PID/stat
// counts CPU time (getconf CLK_TCK; 100 on every Linux this runs on).
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
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

// parseMetric reads the value of the unlabelled sample name from a
// Prometheus text exposition ("name value"; comments skipped).
func parseMetric(text, name string) (float64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("parse metrics: no sample %s", name)
}
