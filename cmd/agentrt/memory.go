package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentrt/agentrt/storage"
)

// memoryCollector is what the server's memory is made of, read at each
// scrape (docs/MEMORY.md): its resident memory as the kernel splits it
// (anonymous: Go's heap, SQLite's caches, plugins' memories and compiled
// code; file-backed: the binary's pages and the database's log index;
// shared), and the store's caches with their bounds. Go's own figures
// (go_memstats_*, go_gc_gomemlimit_bytes) are the Go collector's.
type memoryCollector struct {
	caches    func() storage.Caches
	status    string // /proc/self/status, or a test's file
	resident  *prometheus.Desc
	taskCache *prometheus.Desc
	taskLimit *prometheus.Desc
	dbLimit   *prometheus.Desc
}

func newMemoryCollector(caches func() storage.Caches) *memoryCollector {
	return &memoryCollector{
		caches: caches,
		status: "/proc/self/status",
		resident: prometheus.NewDesc("agentrt_resident_memory_bytes",
			"The process's resident memory by kind, as the kernel counts it: anon (Go's heap, SQLite's page caches, plugins' memories and compiled code), file (the binary's pages, the database's log index), shmem.",
			[]string{"kind"}, nil),
		taskCache: prometheus.NewDesc("agentrt_task_cache_bytes",
			"Memory the store's cache of tasks holds, about, as it counts a task.", nil, nil),
		taskLimit: prometheus.NewDesc("agentrt_task_cache_limit_bytes",
			"The most the store's cache of tasks may hold (--task-cache).", nil, nil),
		dbLimit: prometheus.NewDesc("agentrt_db_cache_limit_bytes",
			"The most SQLite's page caches may hold, the store's connections together (--db-cache).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.resident
	ch <- c.taskCache
	ch <- c.taskLimit
	ch <- c.dbLimit
}

// Collect implements prometheus.Collector.
func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	if rss, err := residentByKind(c.status); err == nil {
		for _, kind := range []string{"anon", "file", "shmem"} {
			ch <- prometheus.MustNewConstMetric(c.resident, prometheus.GaugeValue, float64(rss[kind]), kind)
		}
	}
	caches := c.caches()
	ch <- prometheus.MustNewConstMetric(c.taskCache, prometheus.GaugeValue, float64(caches.Tasks))
	ch <- prometheus.MustNewConstMetric(c.taskLimit, prometheus.GaugeValue, float64(caches.TasksLimit))
	ch <- prometheus.MustNewConstMetric(c.dbLimit, prometheus.GaugeValue, float64(caches.DBLimit))
}

// residentByKind reads RssAnon, RssFile and RssShmem from a
// /proc/PID/status file, in bytes, as anon, file and shmem.
func residentByKind(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	names := map[string]string{"RssAnon:": "anon", "RssFile:": "file", "RssShmem:": "shmem"}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 || string(f[2]) != "kB" {
			continue
		}
		if kind, ok := names[string(f[0])]; ok {
			if kib, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
				out[kind] = kib << 10
			}
		}
	}
	return out, nil
}
