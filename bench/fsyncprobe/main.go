// Command fsyncprobe measures how long an append of 4 KiB plus fsync takes in
// a directory: the floor under any store that syncs each commit one at a time
// (agentrt's SQLite runs WAL with synchronous=FULL and a single writer).
//
//	go run ./bench/fsyncprobe -dir DIR [-n 2000]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory to probe (on the file system under test)")
	n := flag.Int("n", 2000, "appends to time")
	flag.Parse()
	if *n < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fsyncprobe [-dir DIR] [-n N]")
		os.Exit(2)
	}
	f, err := os.CreateTemp(*dir, "fsyncprobe-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
		os.Exit(1)
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, *n)
	start := time.Now()
	for i := range lat {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
			os.Exit(1)
		}
		if err := f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
			os.Exit(1)
		}
		lat[i] = time.Since(t)
	}
	total := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	fmt.Printf("FSYNC_RESULT n=%d per_s=%.0f p50_us=%.0f p99_us=%.0f\n",
		*n, float64(*n)/total.Seconds(), us(lat[len(lat)/2]), us(lat[len(lat)*99/100]))
}
