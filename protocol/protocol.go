// Package protocol is the Agent Protocol v1's domain: its nouns (tasks,
// steps, artifacts, pages), its errors, and the Agent that gives them
// their meaning, running a plugin's handlers and recording what they do.
//
// The package reaches nothing outside itself but through the small
// interfaces it declares: the Store's (store.go) for persistence, Plugin
// and Codec (plugin.go) for running handlers. Its front ends live beside
// it: package httpapi serves it over HTTP under /ap/v1, package wire is
// ABI version 1's message format. Neither depends on the other.
package protocol

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Task is a task as the protocol serves it.
type Task struct {
	TaskID string `json:"task_id"`
	// Input is the task's prompt; nil when the client sent none.
	Input *string `json:"input"`
	// AdditionalInput is a JSON object; {} when the client sent none.
	AdditionalInput json.RawMessage `json:"additional_input"`
	// Artifacts lists every artifact of the task, uploaded or created by the
	// agent, in creation order. Never nil.
	Artifacts []Artifact `json:"artifacts"`
	// Title, Description and Version are the task's metadata, the
	// client's to set at creation and change (UpdateTask); absent when
	// unset. Additions to the specification's Task.
	Title       *string   `json:"title,omitempty"`
	Description *string   `json:"description,omitempty"`
	Version     *string   `json:"version,omitempty"`
	CreatedAt   time.Time `json:"-"`
	// Logs is what the task handler logged, when the task is created.
	Logs []LogRecord `json:"-"`
	// LogBytes is what the task's log holds (task and artifact handlers),
	// as LogSize counts it, or the whole limit once a call's records were
	// cut at it.
	LogBytes int64 `json:"-"`
	// PluginTime is the wall-clock time the task's handler calls have used.
	PluginTime time.Duration `json:"-"`
	// StepCount is how many steps the task holds, planned ones included.
	StepCount int `json:"-"`
	// PlannedLeft is whether the task holds planned steps not yet run.
	PlannedLeft bool `json:"-"`
	// Events are the events CreateTask records with the task (its
	// planned steps'), each given its id (EventStore).
	Events []Event `json:"-"`
}

// StepStatus is a step's lifecycle state.
type StepStatus string

// The statuses of the specification.
const (
	StatusCreated   StepStatus = "created"
	StatusRunning   StepStatus = "running"
	StatusCompleted StepStatus = "completed"
)

// Step is a step as the protocol serves it.
type Step struct {
	TaskID          string          `json:"task_id"`
	StepID          string          `json:"step_id"`
	Name            *string         `json:"name"`
	Status          StepStatus      `json:"status"`
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input"`
	Output          *string         `json:"output"`
	// AdditionalOutput is a JSON object or null. A failed step carries
	// {"error": {"code": ..., "message": ...}} here.
	AdditionalOutput json.RawMessage `json:"additional_output"`
	// Artifacts are the artifacts this step created. Never nil.
	Artifacts []Artifact `json:"artifacts"`
	IsLast    bool       `json:"is_last"`
	// Build says which agent and which build of its plugin ran the step;
	// null until it has run. An addition to the specification's Step.
	Build *StepBuild `json:"build"`
	// Planned is true for a step planned by the task handler.
	Planned bool `json:"-"`
	// Marked is set by Store.StartStep, from its first attempt: the store
	// may hold the step as running. SaveStep writes a new step that was
	// never marked without looking for a row of it.
	Marked    bool        `json:"-"`
	CreatedAt time.Time   `json:"-"`
	Logs      []LogRecord `json:"-"`
	// PluginTime is the wall-clock time the step's handler call used.
	PluginTime time.Duration `json:"-"`
	// Background is set for a step run in the background
	// (ExecuteStepAsync): StartStep waits for the disk, as its client is
	// answered on the strength of it.
	Background bool `json:"-"`
	// Events are the events StartStep and SaveStep record with the step,
	// in the same transaction, each given its id (EventStore).
	Events []Event `json:"-"`
}

// StepBuild names the agent and the build of its plugin that ran a step.
type StepBuild struct {
	Agent string `json:"agent"`
	// SHA256 is the sha256 of the plugin file, in hex.
	SHA256 string `json:"sha256"`
}

// Artifact is a file of a task: uploaded by a client or created by the
// agent. It is bytes agentrt holds, or, when URI is set, a reference to
// bytes held elsewhere (the artifact-management RFC).
//
// As JSON (MarshalJSON), it also says where it came from, as additions to
// the specification's Artifact: "source" ("input" for a client's upload,
// "output" for what the agent made) and "step_id" (the step that made it;
// null for uploads and for what the task and artifact handlers made).
type Artifact struct {
	ArtifactID   string
	AgentCreated bool
	FileName     string
	// RelativePath is the directory of the artifact in the task's workspace,
	// cleaned; "" for the workspace root.
	RelativePath string
	// URI, when set, is what the artifact refers to (CleanURI accepted
	// it); it then has no bytes, and is not in the workspace.
	URI    string
	TaskID string
	// StepID is the step that made the artifact; "" when none did.
	StepID string
	Size   int64
	// SHA256 is the sha256 of the artifact's bytes, in hex; "" for a URI
	// artifact, and for artifacts recorded before agentrt kept it.
	SHA256    string
	CreatedAt time.Time
}

// Artifact sources, as the RFC names them.
const (
	SourceInput  = "input"  // a client uploaded it
	SourceOutput = "output" // the agent made it
)

// Source is where the artifact came from: SourceInput or SourceOutput.
func (a *Artifact) Source() string {
	if a.AgentCreated {
		return SourceOutput
	}
	return SourceInput
}

// artifactJSON is an Artifact as clients see it.
type artifactJSON struct {
	ArtifactID   string  `json:"artifact_id"`
	AgentCreated bool    `json:"agent_created"`
	FileName     string  `json:"file_name"`
	RelativePath string  `json:"relative_path"`
	URI          string  `json:"uri,omitempty"`
	Source       string  `json:"source"`
	StepID       *string `json:"step_id"`
}

// MarshalJSON writes the artifact as clients see it.
func (a Artifact) MarshalJSON() ([]byte, error) {
	v := artifactJSON{ArtifactID: a.ArtifactID, AgentCreated: a.AgentCreated, FileName: a.FileName,
		RelativePath: a.RelativePath, URI: a.URI, Source: a.Source()}
	if a.StepID != "" {
		v.StepID = &a.StepID
	}
	return MarshalJSON(v)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Artifact) UnmarshalJSON(b []byte) error {
	var v artifactJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Artifact{ArtifactID: v.ArtifactID, AgentCreated: v.AgentCreated, FileName: v.FileName,
		RelativePath: v.RelativePath, URI: v.URI}
	if v.StepID != nil {
		a.StepID = *v.StepID
	}
	return nil
}

// WorkspacePath is where the artifact sits in its task's workspace; "" for
// a URI artifact, which is not there.
func (a *Artifact) WorkspacePath() string {
	switch {
	case a.URI != "":
		return ""
	case a.RelativePath == "":
		return a.FileName
	}
	return a.RelativePath + "/" + a.FileName
}

// FileInfo describes a file of a task's workspace.
type FileInfo struct {
	Path    string
	Size    int64
	ModTime time.Time
}

// LogRecord is one line a plugin logged, or wrote to stdout or stderr.
type LogRecord struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// TaskLog is what one handler call adds to its task's log: records, and
// what they count against the task's log limit (all that is left of it
// when they were cut at the limit, so that the log is full).
type TaskLog struct {
	Records []LogRecord
	Bytes   int64
}

// LogRecordOverhead is what a log record costs beyond its message when
// logs are counted against their limits: its time, level and JSON framing
// (about 60 bytes stored). Without it, empty records were free.
const LogRecordOverhead = 64

// LogSize is what records count against a log limit.
func LogSize(records []LogRecord) int64 {
	var n int64
	for _, r := range records {
		n += int64(LogRecordSize([]byte(r.Message)))
	}
	return n
}

// LogRecordSize is what a record of message counts against a log limit:
// LogRecordOverhead plus the message as it is stored, a JSON string
// without HTML escaping (a control character takes 6 bytes there, a quote
// 2), each byte that is not UTF-8 replaced by U+FFFD (3 bytes). It reads
// message in place and allocates nothing.
func LogRecordSize(message []byte) int {
	n := LogRecordOverhead
	for i := 0; i < len(message); {
		c := message[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6 // \u00XX
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(message[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 3 // U+FFFD
		case r == '\u2028' || r == '\u2029':
			n += 6 // encoding/json escapes them
		default:
			n += size
		}
		i += size
	}
	return n
}

// TaskRequestBody is the body of create-task. Title, Description, Version
// and Steps are additions to the specification's.
type TaskRequestBody struct {
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input"`
	Title           *string         `json:"title"`
	Description     *string         `json:"description"`
	Version         *string         `json:"version"`
	// Steps are steps the client plans: each is listed with status
	// "created" and run, in order, by the next execute-steps, before any
	// the task handler plans.
	Steps []RequestedStep `json:"steps"`
}

// StepRequestBody is the body of execute-step.
type StepRequestBody struct {
	Input           *string         `json:"input"`
	AdditionalInput json.RawMessage `json:"additional_input"`
}

// Pagination describes one page of a list.
type Pagination struct {
	TotalItems  int `json:"total_items"`
	TotalPages  int `json:"total_pages"`
	CurrentPage int `json:"current_page"`
	PageSize    int `json:"page_size"`
}

// Page selects a page of a list. The zero Page is not valid; use NewPage.
type Page struct {
	Number int // 1-based
	Size   int
}

// Paging defaults and bounds.
const (
	DefaultPageSize = 10
	MaxPageSize     = 100
)

// Offset is the number of items before the page.
func (p Page) Offset() int { return (p.Number - 1) * p.Size }

// Pagination describes p within a list of total items.
func (p Page) Pagination(total int) Pagination {
	return Pagination{
		TotalItems:  total,
		TotalPages:  (total + p.Size - 1) / p.Size,
		CurrentPage: p.Number,
		PageSize:    p.Size,
	}
}

// TaskList is one page of tasks.
type TaskList struct {
	Tasks      []Task     `json:"tasks"`
	Pagination Pagination `json:"pagination"`
}

// StepList is one page of a task's steps.
type StepList struct {
	Steps      []Step     `json:"steps"`
	Pagination Pagination `json:"pagination"`
}

// ArtifactList is one page of a task's artifacts.
type ArtifactList struct {
	Artifacts  []Artifact `json:"artifacts"`
	Pagination Pagination `json:"pagination"`
}
