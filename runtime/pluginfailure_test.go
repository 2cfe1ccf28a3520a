package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/tetratelabs/wazero"
)

// failing is a plugin with a function for each way guest code stops
// without a result: a trap, an exit, a loop without end, memory refused
// and then a trap, and a call of a host function that stops the call.
const failing = `(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "stopper" "stop" (func $stop))
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0))
  (func (export "trap") (result i32) unreachable)
  (func (export "exit") (result i32) (call $exit (i32.const 3)) (i32.const 0))
  (func (export "spin") (result i32) (loop $l (br $l)) (i32.const 0))
  (func (export "oom") (result i32) (drop (memory.grow (i32.const 100))) unreachable)
  (func (export "stop") (result i32) (call $stop) (i32.const 0)))`

// stopper is a host module whose one function stops the call, as the
// host API does past its host-call limit.
var stopper = HostModule{Name: "stopper", Instantiate: func(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder("stopper").NewFunctionBuilder().
		WithFunc(func(context.Context) {
			panic(protocol.NewPluginFailure(protocol.CauseHostLimit, "the plugin made too many host calls"))
		}).Export("stop").Instantiate(ctx)
	return err
}}

// Every way a call's guest code can fail is a *protocol.PluginFailure,
// found with errors.As, naming its cause and carrying the code the HTTP
// mapping turns into a status; what is not the plugin's doing (the plugin
// closing) is not one.
func TestEveryWayAPluginFailsIsAPluginFailureWithItsCause(t *testing.T) {
	p, err := Compile(context.Background(), "x", watModule(t, failing), Config{MemoryLimitPages: 2, HostModules: []HostModule{stopper}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		export string
		ctx    context.Context
		inv    Invocation
		cause  string
		code   string
	}{
		{"trap", context.Background(), Invocation{}, protocol.CauseTrap, protocol.EPLUGIN},
		{"exit", context.Background(), Invocation{}, protocol.CauseExit, protocol.EPLUGIN},
		{"spin", context.Background(), Invocation{Deadline: time.Now().Add(50 * time.Millisecond)}, protocol.CauseTimeout, protocol.ETIMEOUT},
		{"spin", cancelled, Invocation{}, protocol.CauseCancelled, protocol.EPLUGIN},
		{"oom", context.Background(), Invocation{}, protocol.CauseOutOfMemory, protocol.EPLUGIN},
		{"stop", context.Background(), Invocation{}, protocol.CauseHostLimit, protocol.EPLUGIN},
		{"not_exported", context.Background(), Invocation{}, protocol.CauseOther, protocol.EPLUGIN},
	} {
		t.Run(tc.export+" "+tc.cause, func(t *testing.T) {
			_, _, err := p.Call(tc.ctx, tc.export, tc.inv)
			var f *protocol.PluginFailure
			if !errors.As(err, &f) || f.Cause != tc.cause {
				t.Fatalf("Call: %v (%T); want a plugin failure of cause %s", err, err, tc.cause)
			}
			if code := protocol.ErrorCode(err); code != tc.code || f.Code != tc.code {
				t.Errorf("code %s (the failure's %s), want %s", code, f.Code, tc.code)
			}
		})
	}
	p.Close(context.Background())
	_, _, err = p.Call(context.Background(), "trap", Invocation{})
	if f, ok := errors.AsType[*protocol.PluginFailure](err); ok || protocol.ErrorCode(err) != protocol.EUNAVAILABLE {
		t.Errorf("a call of a closed plugin: %v (a plugin failure: %v); want EUNAVAILABLE, not the plugin's failure", err, f)
	}
}
