package main

import (
	"math"
	"strings"
	"testing"
)

const statusText = `Name:	agentrt
Umask:	0022
State:	S (sleeping)
VmPeak:	 2378020 kB
VmHWM:	   80124 kB
VmRSS:	   74012 kB
RssAnon:	   50000 kB
RssFile:	   23000 kB
RssShmem:	    1012 kB
VmData:	  220804 kB
Threads:	13
SigQ:	0/7823
`

func TestParseStatusReadsSizesInBytes(t *testing.T) {
	got, err := parseStatus(statusText)
	if err != nil {
		t.Fatal(err)
	}
	want := procStatus{VmRSS: 74012 << 10, RssAnon: 50000 << 10, RssFile: 23000 << 10, RssShmem: 1012 << 10, VmHWM: 80124 << 10, Threads: 13}
	if got != want {
		t.Errorf("parseStatus:\n got %+v\nwant %+v", got, want)
	}
}

// A kernel that does not split the resident set is an error, not a split
// of zeros.
func TestParseStatusNeedsEveryField(t *testing.T) {
	for _, field := range []string{"RssAnon", "VmRSS", "Threads"} {
		var kept []string
		for line := range strings.SplitSeq(statusText, "\n") {
			if !strings.HasPrefix(line, field+":") {
				kept = append(kept, line)
			}
		}
		if _, err := parseStatus(strings.Join(kept, "\n")); err == nil {
			t.Errorf("no error without %s", field)
		}
	}
	if _, err := parseStatus(strings.Replace(statusText, "74012 kB", "lots kB", 1)); err == nil {
		t.Error("no error for a size that is not a number")
	}
}

// The command's name may hold spaces and brackets: the fields are counted
// after its last ')'.
func TestParseCPUTicksSkipsTheCommandName(t *testing.T) {
	stat := "4242 (agent rt) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 13 0 100 2378020352 18503 18446744073709551615"
	got, err := parseCPUTicks(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 287 {
		t.Errorf("user + system ticks: %d, want 250 + 37", got)
	}
	if _, err := parseCPUTicks("4242 (agentrt) S 1 2"); err == nil {
		t.Error("no error for a short stat line")
	}
}

func TestParseMetricsReadsUnlabelledGauges(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 16
go_memstats_heap_inuse_bytes 3.612672e+06
go_memstats_heap_sys_bytes{extra="label"} 99
go_memstats_sys_bytes 1.7930504e+07 1700000000000
agentrt_http_requests_total{route="/ap/v1/agent/tasks",method="POST",status="200"} 12
`
	got, err := parseMetrics(strings.NewReader(text), goMetrics)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"go_goroutines": 16, "go_memstats_heap_inuse_bytes": 3612672, "go_memstats_sys_bytes": 17930504,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if v := got["go_memstats_heap_sys_bytes"]; !math.IsNaN(v) {
		t.Errorf("a metric given only with labels reads %v, want NaN", v)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines many\n"), goMetrics); err == nil {
		t.Error("no error for a value that is not a number")
	}
}
