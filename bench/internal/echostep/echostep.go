// Package echostep is what the benchmarks hand a plugin for one echo
// step: the step's input message, and a host that answers the host API
// keeping only the step's result. The plugin is loaded as agentrt loads
// any (runtime/plugin), so that its host module is the one served.
package echostep

import (
	"context"
	"io"

	"github.com/agentrt/agentrt/hostapi"
	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/runtime"
	"github.com/agentrt/agentrt/runtime/plugin"
)

// Input is an echo step's input message.
var Input = []byte(`{"abi":1,"handler":"step","task":{"task_id":"6bb1801a-fd80-45e8-899a-4dd723cc602e","input":"hi","additional_input":{},"artifacts":[]},` +
	`"step":{"step_id":"28ca533e-3904-4401-8a07-c49adf8891c2","name":null,"input":"hi","additional_input":{},"planned":false},"request":{"input":"hi","additional_input":{}}}`)

// Call is one call of p's step handler with input, answering the host API
// with a Host rather than an agent's call: the store and the domain are
// left out. It returns the handler's exit code and its result.
func Call(ctx context.Context, p *plugin.Plugin, input []byte) (code int32, result []byte, err error) {
	h := &Host{input: input}
	bind := func(ctx context.Context) context.Context { return hostapi.WithHost(ctx, h) }
	code, _, err = p.Runtime().Call(ctx, abi.StepExport, runtime.Invocation{Stdout: io.Discard, Stderr: io.Discard, Host: bind})
	return code, h.result, err
}

// Host answers the host API for a step, keeping only its result.
type Host struct {
	input  []byte
	result []byte
}

func (h *Host) Input() []byte                                { return h.input }
func (h *Host) SetResult(b []byte) error                     { h.result = append(h.result[:0], b...); return nil }
func (*Host) Log(string, []byte) error                       { return nil }
func (*Host) Progress(context.Context, []byte, []byte) error { return nil }
func (*Host) Config() []byte                                 { return []byte("{}") }
func (*Host) BeforeEffect(context.Context) error             { return nil }
func (*Host) CreateArtifact(context.Context, protocol.ArtifactSpec, []byte) (string, error) {
	return "", nil
}
func (*Host) WorkspaceReadInto(context.Context, string, []byte) (int64, error)   { return 0, nil }
func (*Host) WorkspaceWrite(context.Context, string, []byte) error               { return nil }
func (*Host) WorkspaceList(context.Context, string) ([]protocol.FileInfo, error) { return nil, nil }
func (*Host) WorkspaceStat(context.Context, string) (protocol.FileInfo, error) {
	return protocol.FileInfo{}, nil
}
func (*Host) WorkspaceDelete(context.Context, string) error { return nil }
func (*Host) DownloadWrite(context.Context, []byte) error   { return nil }
func (*Host) FetchArtifact(context.Context, string, string, func(context.Context, string) ([]byte, error)) (int64, error) {
	return 0, nil
}
