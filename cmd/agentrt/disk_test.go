package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/storage/disktest"
)

// fill writes a file until the file system is full, to the last byte.
func fill(t *testing.T, dir string) string {
	t.Helper()
	return disktest.Fill(t, dir)
}

func TestAFullDiskIsAClearErrorAndLosesNothing(t *testing.T) {
	disktest.Run(t, "size=24m", func(t *testing.T, mnt string) {
		ts := serve(t, examplePlugin(t, "washington-go"), func(c *runConfig) { c.dataDir = filepath.Join(mnt, "data") })
		task := ts.createTask(`{"input":"keep me"}`)
		ts.step(task.TaskID, `{"input":"write Washington"}`)
		ts.upload(task.TaskID, part{name: "file", fileName: "before.bin", value: strings.Repeat("b", 1<<20)}).want(t, 200)
		before := snapshot(t, ts.URL)

		filler := fill(t, mnt)
		// An upload that cannot fit: 507, and nothing half-written remains.
		ts.upload(task.TaskID, part{name: "file", fileName: "big.bin", value: strings.Repeat("x", 2<<20)}).
			wantError(t, 507, "disk is full")
		// Other writes fail the same way or, if SQLite still has room in its
		// files, succeed; never a 500.
		for _, try := range []func() *response{
			func() *response { return ts.do("POST", "/ap/v1/agent/tasks", "", `{"input":"while full"}`) },
			func() *response {
				return ts.do("POST", "/ap/v1/agent/tasks/"+task.TaskID+"/steps", "", `{"input":"write Washington"}`)
			},
		} {
			res := try()
			if res.status != 200 && res.status != 507 {
				t.Errorf("a write on a full disk answered %d: %s", res.status, res.body)
			}
			if res.status == 507 {
				res.wantError(t, 507, "disk is full")
			}
		}
		// Reads go on.
		ts.do("GET", "/ap/v1/agent/tasks/"+task.TaskID, "", "").want(t, 200)

		os.Remove(filler)
		assertNoStrayFiles(t, ts.cfg.dataDir)
		// Once there is room again, everything acknowledged before is intact
		// and writes work.
		after := snapshot(t, ts.URL)
		for _, line := range strings.Split(before, "\n") {
			if strings.Contains(line, `"tasks":`) || strings.Contains(line, `"steps":`) {
				continue // lists may have grown by a write that still fitted
			}
			if !strings.Contains(after, line) {
				t.Errorf("acknowledged before the disk filled, changed after: %.300s", line)
			}
		}
		ts.upload(task.TaskID, part{name: "file", fileName: "after.bin", value: "room again"}).want(t, 200)
		ts.createTask(`{"input":"after"}`)
	})
}
