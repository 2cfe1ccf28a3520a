package abi

// Progress, added within version 1: a step handler says how far it has
// come while it runs, and every client watching its task's events sees
// it at once (the step.progress event).
const (
	// progress(msg, msg_len, output, output_len) -> 0: a progress report
	// of the step handler: a message (UTF-8 text) and, optionally, the
	// step's output so far (output_len 0 for none). Only the step handler
	// may report progress (ErrNotAllowed elsewhere). A report counts
	// against the call's log limit as a log line of its message and
	// output would (ErrLimit once it is reached: the report is dropped),
	// and as a host call.
	FuncProgress = "progress"
	// MaxProgressMessageBytes bounds a progress report's message; a longer
	// one is refused with ErrLimit before it is read.
	MaxProgressMessageBytes = 1024
	// MaxProgressOutputBytes bounds a progress report's partial output; a
	// longer one is refused with ErrLimit before it is read.
	MaxProgressOutputBytes = 16 << 10
)
