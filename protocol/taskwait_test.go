package protocol_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/protocoltest"
)

// Steps and uploads of one task wait for its lock before any instance
// limit: behind a stalled step, any number of requests waited, each with
// its decoded body. At most MaxTaskWaiters wait; the next is refused at
// once with EUNAVAILABLE (503 with Retry-After), and nothing is recorded
// for it. Other tasks are not held up.
func TestRequestsWaitingForOneTaskAreBoundedAndTheRestRefused(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var stalled atomic.Bool
	p := protocoltest.NewPlugin(map[protocol.Handler]protocoltest.Handler{protocol.HandlerStep: func(ctx context.Context, call *protocol.Call) (int32, error) {
		if stalled.CompareAndSwap(false, true) { // the first step stalls
			entered <- struct{}{}
			<-release
		}
		return 0, call.SetResult([]byte(`{"output":"ok"}`))
	}})
	s := protocoltest.NewStore()
	a := newAgent(t, s, p, protocol.DefaultLimits)
	waiting := make(chan string, 2*protocol.MaxTaskWaiters)
	protocol.OnLockWait(a, func(taskID string) { waiting <- taskID })
	busy, other := mustCreateTask(t, a), mustCreateTask(t, a)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 1+protocol.MaxTaskWaiters)
	step := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.ExecuteStep(ctx, busy.TaskID, protocol.StepRequestBody{Input: str("waits")})
			errs <- err
		}()
	}
	step()
	<-entered
	for range protocol.MaxTaskWaiters {
		step()
	}
	for range protocol.MaxTaskWaiters {
		if id := <-waiting; id != busy.TaskID {
			t.Fatalf("a request for %s waited, want one for %s", id, busy.TaskID)
		}
	}

	// One more step, and an upload's commit, are refused without waiting.
	for what, try := range map[string]func() error{
		"a step": func() error {
			_, err := a.ExecuteStep(ctx, busy.TaskID, protocol.StepRequestBody{Input: str("refused")})
			return err
		},
		"an upload": func() error {
			_, err := upload(a, busy.TaskID, "refused.txt", "data")
			return err
		},
	} {
		res := make(chan error, 1)
		go func() { res <- try() }()
		select {
		case err := <-res:
			var e *protocol.Error
			if !errors.As(err, &e) || e.Code != protocol.EUNAVAILABLE || e.RetryAfter <= 0 {
				t.Errorf("%s past %d waiting: %v; want EUNAVAILABLE with Retry-After", what, protocol.MaxTaskWaiters, err)
			}
		case <-waiting:
			t.Errorf("%s waited with %d requests waiting already", what, protocol.MaxTaskWaiters)
			close(release)
			wg.Wait()
			<-res
			return
		}
	}
	// Another task is served meanwhile.
	if _, err := a.ExecuteStep(ctx, other.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Errorf("a step of another task: %v", err)
	}

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a step that waited its turn: %v", err)
		}
	}
	if n := len(s.Steps[busy.TaskID]); n != 1+protocol.MaxTaskWaiters {
		t.Errorf("the busy task holds %d steps, want %d: refused requests record nothing", n, 1+protocol.MaxTaskWaiters)
	}
	if len(s.Staged) != 0 || len(s.Tasks[busy.TaskID].Artifacts) != 0 {
		t.Errorf("a refused upload left %d staged files, %d artifacts", len(s.Staged), len(s.Tasks[busy.TaskID].Artifacts))
	}
	// Once the task is free, it takes requests again.
	if _, err := a.ExecuteStep(ctx, busy.TaskID, protocol.StepRequestBody{}); err != nil {
		t.Errorf("a step once the task is free: %v", err)
	}
}
