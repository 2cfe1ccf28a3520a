package protocol

import (
	"context"
	"encoding/json"
	"time"
)

// Handler names a plugin handler.
type Handler string

// The handlers a plugin may define.
const (
	// HandlerTask runs when a task is created, and may plan its steps.
	HandlerTask Handler = "task"
	// HandlerStep executes a step.
	HandlerStep Handler = "step"
	// HandlerArtifact runs on each upload, and may accept, reject or
	// replace it.
	HandlerArtifact Handler = "artifact"
	// HandlerDownload serves an artifact's download: it writes the bytes,
	// or leaves the download to the host.
	HandlerDownload Handler = "download"
)

// Plugin runs the agent's handlers; runtime/plugin's Plugin implements it
// (runtime's module with the host API bound to each call).
type Plugin interface {
	// HasHandler reports whether the plugin defines a handler.
	HasHandler(h Handler) bool
	// Codec is the wire format of the plugin's ABI: how the handlers'
	// input is written and their results read.
	Codec() Codec
	// Run runs the handler in a fresh instance whose host functions act on
	// call, and returns the handler's return code and how long the plugin
	// ran. When the plugin failed (trap, timeout, exit, limit), the error
	// is a *PluginFailure (NewPluginFailure) naming the cause: only that
	// is recorded as the plugin's failure. Any other error means the
	// handler did not run, through no fault of the plugin's: an *Error
	// such as EUNAVAILABLE, or an internal error. A call still running at
	// call.Deadline() (when it is not zero) is stopped as timed out
	// (CauseTimeout), one still waiting to run fails with EUNAVAILABLE.
	Run(ctx context.Context, h Handler, call *Call) (int32, time.Duration, error)
}

// Codec is a plugin ABI's wire format; package wire implements ABI
// version 1. The Decode methods read a result message that checkJSON has
// accepted (UTF-8, nested at most MaxJSONDepth deep); they fail with a
// plain error saying what is wrong with it, or an *Error whose message is
// the client's as it is: either way the plugin's failure (CauseBadResult).
type Codec interface {
	// EncodeInput writes the message a handler reads.
	EncodeInput(in *HandlerInput) []byte
	// DecodeTaskResult reads a task handler's result. A result planning
	// more than maxSteps steps is refused before the steps are decoded.
	DecodeTaskResult(b []byte, maxSteps int) (*TaskResult, error)
	// DecodeStepResult reads a step handler's result.
	DecodeStepResult(b []byte) (*StepResult, error)
	// DecodeArtifactResult reads an artifact handler's result.
	DecodeArtifactResult(b []byte) (*ArtifactResult, error)
	// DecodeDownloadResult reads a download handler's result.
	DecodeDownloadResult(b []byte) (*DownloadResult, error)
}

// HandlerInput is what a handler is called with.
type HandlerInput struct {
	Handler Handler
	Task    *Task
	// Step and Request are set for the step handler: the step being
	// executed and the execute-step request.
	Step    *Step
	Request *StepRequestBody
	// Artifact is set for the artifact handler, the upload (whose bytes,
	// unless it is a URI artifact, are in the workspace at its
	// WorkspacePath), and for the download handler, the artifact
	// downloaded.
	Artifact *Artifact
}

// TaskResult is what a task handler returns.
type TaskResult struct {
	// Steps are planned, in order; each is listed with status "created"
	// until it is executed.
	Steps []PlannedStep
	// Error, when set, fails the handler with this message.
	Error string
}

// PlannedStep is one step a task handler plans.
type PlannedStep struct {
	Name            string
	Input           *string
	AdditionalInput json.RawMessage
}

// StepResult is what a step handler returns.
type StepResult struct {
	Output           *string
	AdditionalOutput json.RawMessage
	// Name, when set, replaces the step's name.
	Name   *string
	IsLast bool
	Error  string
}

// ArtifactResult is what an artifact handler returns. A Reject reason
// refuses the upload; the client sees it. Replace, for a URI upload,
// keeps another artifact in its place.
type ArtifactResult struct {
	Reject  string
	Replace *Replacement
	Error   string
}

// Replacement is what an artifact handler keeps in place of a URI upload:
// another URI, or the bytes of a workspace file (then the artifact is that
// file, named by its path). Exactly one is set.
type Replacement struct {
	URI           string
	WorkspacePath string
}

// DownloadResult is what a download handler returns. Default leaves the
// download to the host, as if the plugin had no download handler; it
// must then have written nothing.
type DownloadResult struct {
	Default bool
	Error   string
}
