package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage/disktest"
)

// What a server logs when it starts with the marks of interrupted steps
// deferred for want of disk, and when it writes them after all.
const (
	marksDeferredLine = "the disk is full: steps running when the last process stopped"
	marksWrittenLine  = "the disk has room again: steps running when the last process stopped are now recorded"
)

// A server killed while steps ran restarts on a full disk: it serves
// every read (tasks, steps, artifacts and their bytes), shows the steps
// it could not mark as interrupted exactly as it will once it has, answers
// writes 507 and runs no step beside them; once there is room it records
// them by itself, for good, and serves writes.
func TestAServerKilledOnAFullDiskStartsServesReadsAndRecordsInterruptedStepsOnceThereIsRoom(t *testing.T) {
	disktest.Run(t, "size=64m", func(t *testing.T, mnt string) {
		data, cache := filepath.Join(mnt, "data"), filepath.Join(mnt, "cache")
		plugin := goPlugin(t, "testdata/plugins/faulty")
		flags := []string{"--call-timeout", "2m", "--cache", cache}
		p := startProcess(t, plugin, data, flags...)

		// A step the client executes and a step the task planned, each
		// running when the process dies, and an uploaded artifact.
		var fresh, planned protocol.Task
		p.do("POST", "/ap/v1/agent/tasks", "application/json", `{}`).want(t, 200).decode(t, &fresh)
		p.do("POST", "/ap/v1/agent/tasks", "application/json", `{"steps":[{"name":"long","input":"sleep:120000"},"after"]}`).want(t, 200).decode(t, &planned)
		content := make([]byte, 256<<10)
		rand.Read(content)
		ct, body := multipartBody(t, part{name: "file", fileName: "kept.bin", value: string(content)})
		var art protocol.Artifact
		doRequest(t, p.url, "POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/artifacts", ct, body).want(t, 200).decode(t, &art)
		p.startStep(fresh.TaskID, `{"input":"sleep:120000"}`)
		p.startStep(planned.TaskID, `{}`)
		runningFresh := p.waitRunning(fresh.TaskID)
		runningPlanned := p.waitRunning(planned.TaskID)
		p.kill()

		// The disk fills to its last byte, and the compiled-code cache is gone
		// too: the start compiles the plugin again, with nowhere to cache it.
		if err := os.RemoveAll(cache); err != nil {
			t.Fatal(err)
		}
		filler := fill(t, mnt)
		p = startProcess(t, plugin, data, flags...)
		if !strings.Contains(p.log(), marksDeferredLine) {
			t.Errorf("the start does not say it deferred the marks of interrupted steps:\n%s", p.log())
		}

		// Every read, while the marks wait.
		type reads struct{ tasks, fresh, freshSteps, freshStep, plannedSteps, plannedStep, artifacts string }
		readAll := func(p *process) reads {
			t.Helper()
			get := func(path string) string { return compactJSON(t, p.do("GET", path, "", "").want(t, 200).body) }
			prefix := "/ap/v1/agent/tasks/"
			return reads{
				tasks:        get("/ap/v1/agent/tasks"),
				fresh:        get(prefix + fresh.TaskID),
				freshSteps:   get(prefix + fresh.TaskID + "/steps"),
				freshStep:    get(prefix + fresh.TaskID + "/steps/" + runningFresh.StepID),
				plannedSteps: get(prefix + planned.TaskID + "/steps"),
				plannedStep:  get(prefix + planned.TaskID + "/steps/" + runningPlanned.StepID),
				artifacts:    get(prefix + fresh.TaskID + "/artifacts"),
			}
		}
		checkInterrupted := func(p *process, when string) {
			t.Helper()
			for _, tc := range []struct {
				taskID string
				step   protocol.Step
			}{{fresh.TaskID, runningFresh}, {planned.TaskID, runningPlanned}} {
				var st protocol.Step
				p.do("GET", "/ap/v1/agent/tasks/"+tc.taskID+"/steps/"+tc.step.StepID, "", "").want(t, 200).decode(t, &st)
				code, why := stepError(t, st)
				if st.Status != protocol.StatusCompleted || code != protocol.EINTERRUPTED || !strings.Contains(why, "interrupted") || st.Output != nil {
					t.Errorf("%s, a step left running reads %s %s %q", when, st.Status, code, why)
				}
				var list protocol.StepList
				p.do("GET", "/ap/v1/agent/tasks/"+tc.taskID+"/steps", "", "").want(t, 200).decode(t, &list)
				for _, s := range list.Steps {
					if s.Status == protocol.StatusRunning {
						t.Errorf("%s, the task lists step %s running", when, s.StepID)
					}
				}
			}
		}
		full := readAll(p)
		checkInterrupted(p, "on the full disk")
		if got := p.do("GET", "/ap/v1/agent/tasks/"+fresh.TaskID+"/artifacts/"+art.ArtifactID, "", "").want(t, 200).body; !bytes.Equal(got, content) {
			t.Errorf("an artifact downloaded on the full disk is %d bytes, not the %d uploaded", len(got), len(content))
		}
		if !strings.Contains(full.plannedSteps, `"status":"created"`) {
			t.Errorf("the step planned after the interrupted one is not planned still: %s", full.plannedSteps)
		}

		// Writes are refused, and no step runs.
		p.do("POST", "/ap/v1/agent/tasks", "application/json", `{"input":"while full"}`).wantError(t, 507, "disk is full")
		p.do("POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/steps", "application/json", `{"input":"again"}`).wantError(t, 507, "disk is full")
		p.do("POST", "/ap/v1/agent/tasks/"+planned.TaskID+"/steps", "application/json", `{}`).wantError(t, 507, "disk is full")
		ct, body = multipartBody(t, part{name: "file", fileName: "more.bin", value: "more"})
		doRequest(t, p.url, "POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/artifacts", ct, body).wantError(t, 507, "disk is full")
		if after := readAll(p); after != full {
			t.Errorf("refused writes changed what is read:\n%+v\n%+v", full, after)
		}

		// Room again: the server records the steps by itself.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the interrupted steps recorded once there is room", func() bool {
			return strings.Contains(p.log(), marksWrittenLine)
		})
		if n := strings.Count(p.log(), marksWrittenLine); n != 1 {
			t.Errorf("the marks written are logged %d times:\n%s", n, p.log())
		}
		// For good: a start after another kill finds nothing left running, and
		// reads what the full disk read.
		p.kill()
		p = startProcess(t, plugin, data, flags...)
		if strings.Contains(p.log(), "interrupted") {
			t.Errorf("the start after the marks were written found steps still running:\n%s", p.log())
		}
		if after := readAll(p); after != full {
			t.Errorf("what the full disk read is not what is read once the steps are recorded:\n%+v\n%+v", full, after)
		}

		// Writes work: each task goes on where recovery left it.
		var next protocol.Step
		p.do("POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/steps", "application/json", `{"input":"again"}`).want(t, 200).decode(t, &next)
		if deref(next.Output) != "again" {
			t.Errorf("the next step answered %+v", next)
		}
		p.do("POST", "/ap/v1/agent/tasks/"+planned.TaskID+"/steps", "application/json", `{}`).want(t, 200).decode(t, &next)
		if deref(next.Name) != "after" {
			t.Errorf("the next step of the planned task is %q, want \"after\"", deref(next.Name))
		}
		ct, body = multipartBody(t, part{name: "file", fileName: "more.bin", value: "more"})
		doRequest(t, p.url, "POST", "/ap/v1/agent/tasks/"+fresh.TaskID+"/artifacts", ct, body).want(t, 200)
	})
}
