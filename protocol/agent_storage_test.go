package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/storage"
)

// countingPlugin is a step handler that counts its runs and succeeds.
type countingPlugin struct{ runs int }

func (p *countingPlugin) HasHandler(h string) bool { return h == "step" }

func (p *countingPlugin) Run(ctx context.Context, handler string, call *protocol.Call) (int32, time.Duration, error) {
	p.runs++
	return 0, time.Millisecond, call.SetResult([]byte(`{"output":"ran"}`))
}

func TestNoHandlerRunsWhileTheDiskIsAtItsFloor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := storage.Open(ctx, dir, storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	plugin := &countingPlugin{}
	task, err := protocol.NewAgent(s, plugin, protocol.AgentConfig{Limits: protocol.DefaultLimits}).
		CreateTask(ctx, protocol.TaskRequestBody{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopened with a floor no disk has room for: the disk is at its floor.
	s, err = storage.Open(ctx, dir, storage.Config{MinFreeDisk: 1 << 60})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := protocol.NewAgent(s, plugin, protocol.AgentConfig{Limits: protocol.DefaultLimits})
	_, err = a.ExecuteStep(ctx, task.TaskID, protocol.StepRequestBody{})
	if protocol.ErrorCode(err) != protocol.EINSUFFICIENT {
		t.Errorf("a step at the disk's floor: %v, want %s", err, protocol.EINSUFFICIENT)
	}
	// Its run could not have been recorded, nor its time counted against
	// the task's budget: it must not have happened.
	if plugin.runs != 0 {
		t.Errorf("the step handler ran %d times while nothing could be recorded", plugin.runs)
	}
}
