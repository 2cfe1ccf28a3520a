package agent

import "github.com/agentrt/agentrt/plugins/abi"

// Progress reports how far the step handler has come: message becomes a
// step.progress event of the task, which every client watching the
// task's events sees at once (docs/EVENTS.md). It is the step handler's
// only: elsewhere the report is refused with ErrNotAllowed.
//
// What it costs: one host call (counted against the call's host-call
// limit) and a copy of message. The first report of a step that agentrt
// has not yet marked running waits while it does so (one write to the
// store, so that watchers see the step running); later reports do not
// wait for the store.
//
// Rules: message is UTF-8 text of at most abi.MaxProgressMessageBytes
// (1 KiB); bytes that are not UTF-8 are kept as U+FFFD. A report counts
// against the call's log limit (--max-log, 64 KiB by default) as a log
// line of the same text would: 64 bytes plus the text as stored, a JSON
// string. A longer message, or a report that would put the log over its
// limit, is dropped and refused with ErrLimit; a later, smaller report
// may still fit. A failed report does not fail the step: most handlers
// ignore the error.
func Progress(message string) error { return progress(message, "") }

// ProgressOutput is Progress with the step's output so far, output,
// which a client may show in place of the step's output until the step
// ends (the event's "output"). output is UTF-8 text of at most
// abi.MaxProgressOutputBytes (16 KiB); "" gives none, as Progress does.
// It counts against the call's log limit with message, as one log line
// of the two would (64 bytes plus both texts as stored), and is copied
// too: a long output sent with every report soon fills the log limit,
// so send it when it has changed.
func ProgressOutput(message, output string) error { return progress(message, output) }

func progress(message, output string) error {
	if code := hostProgress(strPtr(message), uint32(len(message)), strPtr(output), uint32(len(output))); code < 0 {
		return hostError(abi.FuncProgress, code)
	}
	return nil
}
