package main

import "testing"

func TestStatusGivesTheResidentSetSplitInBytes(t *testing.T) {
	text := "Name:\tagentrt\nVmRSS:\t   90520 kB\nRssAnon:\t   68100 kB\nRssFile:\t   21300 kB\nRssShmem:\t    1120 kB\nThreads:\t13\n"
	got, err := parseStatus(text)
	if err != nil {
		t.Fatal(err)
	}
	want := procStatus{VmRSS: 90520 << 10, RssAnon: 68100 << 10, RssFile: 21300 << 10, RssShmem: 1120 << 10, Threads: 13}
	if got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
	if _, err := parseStatus("VmRSS:\t1 kB\nThreads:\t1\n"); err == nil {
		t.Error("a status without RssAnon parsed: the split would be zeros")
	}
}

func TestCPUTicksAreCountedAfterTheCommandsName(t *testing.T) {
	// A name with spaces and a bracket, which a split on spaces would
	// shift by three fields.
	text := "4242 (agent rt) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1500 250 0 0 20 0 13 0 100 0\n"
	got, err := parseCPUTicks(text)
	if err != nil || got != 1750 {
		t.Errorf("parseCPUTicks = %d, %v; want 1750", got, err)
	}
}

func TestKernelTCPMemoryIsInPages(t *testing.T) {
	text := "sockets: used 300\nTCP: inuse 20 orphan 0 tw 3 alloc 22 mem 9170\nUDP: inuse 1 mem 2\n"
	got, err := parseTCPMemPages(text)
	if err != nil || got != 9170 {
		t.Errorf("parseTCPMemPages = %d, %v; want 9170", got, err)
	}
}

func TestOpenFilesLimitIsReadFromLimits(t *testing.T) {
	text := "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            20000                20000                files     \n"
	soft, hard, err := parseOpenFilesLimit(text)
	if err != nil || soft != "20000" || hard != "20000" {
		t.Errorf("parseOpenFilesLimit = %q, %q, %v", soft, hard, err)
	}
}

func TestAMetricIsReadByItsName(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines_x 3\ngo_goroutines 80\n"
	got, err := parseMetric(text, "go_goroutines")
	if err != nil || got != 80 {
		t.Errorf("parseMetric = %v, %v; want 80", got, err)
	}
}

func TestCountsHaveCommasBetweenThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
