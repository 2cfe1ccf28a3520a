package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/protocol"
)

// asyncStorm sends one background step, a long sleep, to each task
// (agent prefix, task id) at once, as that many clients would, and
// returns each task's answer.
func asyncStorm(t *testing.T, base string, tasks [][2]string) []*response {
	t.Helper()
	answers := make([]*response, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, tk := range tasks {
		wg.Go(func() {
			answers[i], errs[i] = sendAsyncStep(base, tk[0], tk[1], `{"input":"sleep:120000"}`)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return answers
}

// wantBound wants exactly accepted of the answers accepted (202,
// running) and every other refused with 503, Retry-After and a message
// holding refusal, its task holding no step and no event of one; it
// returns the steps accepted.
func wantBound(t *testing.T, base string, tasks [][2]string, answers []*response, accepted int, refusal string) []protocol.Step {
	t.Helper()
	var steps []protocol.Step
	for i, res := range answers {
		if res.status == http.StatusAccepted {
			var st protocol.Step
			res.decode(t, &st)
			steps = append(steps, st)
			continue
		}
		res.wantError(t, http.StatusServiceUnavailable, refusal)
		if res.header.Get("Retry-After") == "" || res.json(t)["code"] != protocol.EUNAVAILABLE {
			t.Errorf("a step refused past the bound: %v %s, want Retry-After and the code %s", res.header, res.body, protocol.EUNAVAILABLE)
		}
		prefix, taskID := tasks[i][0], tasks[i][1]
		var list protocol.StepList
		doRequest(t, base, "GET", prefix+"/ap/v1/agent/tasks/"+taskID+"/steps", "", nil).want(t, 200).decode(t, &list)
		if evs := eventLogOf(t, base, prefix, taskID); len(list.Steps) != 0 || len(evs) != 0 {
			t.Errorf("a refused step's task holds %d steps and events %+v, want nothing recorded", len(list.Steps), evs)
		}
	}
	if len(steps) != accepted {
		t.Fatalf("%d of %d background steps accepted, want %d", len(steps), len(answers), accepted)
	}
	return steps
}

// cancelRunningStep cancels a step running in the background, freeing its
// place.
func cancelRunningStep(t *testing.T, base, prefix string, st protocol.Step) {
	t.Helper()
	doRequest(t, base, "POST", prefix+"/ap/v1/agent/tasks/"+st.TaskID+"/steps/"+st.StepID+"/cancel", "", nil).want(t, 200)
}

// Many clients ask one agent for background steps at once, each on a
// task of its own: --max-background-steps of them are accepted and run,
// the rest are refused with 503 and Retry-After before anything is
// recorded; /metrics shows the steps running; a step ended frees its
// place.
func TestManyClientsPastAnAgentsBackgroundBoundAreRefusedAndNothingIsRecorded(t *testing.T) {
	const clients = 12
	cfg, err := parseRunFlags([]string{goPlugin(t, "testdata/plugins/faulty"), "--data", t.TempDir(),
		"--cache", filepath.Join(buildDir, "cache"), "--max-background-steps", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	var tasks [][2]string
	for range clients {
		tasks = append(tasks, [2]string{"", ts.createTask(`{}`).TaskID})
	}

	steps := wantBound(t, ts.URL, tasks, asyncStorm(t, ts.URL, tasks), 2, "agent "+cfg.name+" runs 2 steps in the background, the most it may")
	for _, st := range steps {
		var got protocol.Step
		ts.do("GET", "/ap/v1/agent/tasks/"+st.TaskID+"/steps/"+st.StepID, "", "").want(t, 200).decode(t, &got)
		if got.Status != protocol.StatusRunning {
			t.Errorf("an accepted step reads %s while the others are refused, want running", got.Status)
		}
	}
	m := ts.scrapeMetrics()
	if got := m.get("agentrt_background_steps", "agent="+cfg.name); got != 2 {
		t.Errorf("agentrt_background_steps{agent=%s} = %v, want 2", cfg.name, got)
	}
	if got := m.get("agentrt_background_steps_limit"); got != 256 {
		t.Errorf("agentrt_background_steps_limit = %v, want the default total, 256", got)
	}

	// A step cancelled frees its place: a refused client's, sent again,
	// is accepted.
	cancelRunningStep(t, ts.URL, "", steps[0])
	acceptedAsyncStep(t, ts.URL, "", refusedTask(tasks, steps, ""), `{"input":"sleep:120000"}`)
}

// refusedTask is a task of tasks on which no step of steps runs, of an
// agent other than the one at prefix not ("": any).
func refusedTask(tasks [][2]string, steps []protocol.Step, not string) string {
	for _, tk := range tasks {
		running := false
		for _, st := range steps {
			running = running || st.TaskID == tk[1]
		}
		if !running && (not == "" || tk[0] != not) {
			return tk[1]
		}
	}
	return ""
}

// prefixOf is the agent prefix of task taskID.
func prefixOf(tasks [][2]string, taskID string) string {
	for _, tk := range tasks {
		if tk[1] == taskID {
			return tk[0]
		}
	}
	return ""
}

// The bound across agents: with --max-background-steps-total 1, one
// step of two agents' is accepted, every other client's, of either
// agent, is refused naming the server's bound, with nothing recorded;
// once it ends, the other agent's is accepted.
func TestManyClientsPastTheServersBackgroundBoundAreRefusedAcrossAgents(t *testing.T) {
	const perAgent = 6
	dir := t.TempDir()
	code := pluginBytes(t, goPlugin(t, "testdata/plugins/faulty"))
	for _, name := range []string{"one", "two"} {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), code, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := serveDir(t, dir, func(cfg *runConfig) { cfg.maxBackgroundTotal = 1 })
	var tasks [][2]string
	for range perAgent {
		for _, name := range []string{"one", "two"} {
			tasks = append(tasks, [2]string{"/agents/" + name, ts.agentTask(name, `{}`)})
		}
	}

	steps := wantBound(t, ts.URL, tasks, asyncStorm(t, ts.URL, tasks), 1, "the server runs 1 steps in the background, the most it may")
	if got := ts.scrapeMetrics().get("agentrt_background_steps_limit"); got != 1 {
		t.Errorf("agentrt_background_steps_limit = %v, want 1", got)
	}

	// Its place freed, the other agent's step is accepted.
	owner := prefixOf(tasks, steps[0].TaskID)
	other := refusedTask(tasks, steps, owner)
	cancelRunningStep(t, ts.URL, owner, steps[0])
	acceptedAsyncStep(t, ts.URL, prefixOf(tasks, other), other, `{"input":"sleep:120000"}`)
}
