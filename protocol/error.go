package protocol

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Error codes. Each maps to one HTTP status in statusOf; an error without a
// code is internal and its text never reaches a client.
const (
	ENOTFOUND      = "not_found"             // 404: no such task, step, artifact or route
	EINVALID       = "invalid"               // 400: a bad query parameter
	EUNPROCESSABLE = "unprocessable"         // 422: a malformed or mistyped body
	EBADPATH       = "bad_path"              // 422: a file name or path that was refused
	ETOOLARGE      = "too_large"             // 413: a body, file or quota over its limit
	EMETHOD        = "method"                // 405: a known route, another method
	ECONFLICT      = "conflict"              // 409: the agent is gone (its plugin was removed)
	EREJECTED      = "rejected"              // 422: the plugin refused an upload
	EPLUGIN        = "plugin_failed"         // 502: a plugin trapped, exited or answered badly
	ETIMEOUT       = "plugin_timeout"        // 504: a plugin call ran out of time
	EUNAVAILABLE   = "unavailable"           // 503: too busy right now; retry
	ELIMIT         = "limit_reached"         // 429: a task used up a budget (its plugin time)
	EINSUFFICIENT  = "storage_full"          // 507: the disk is full
	EINTERNAL      = "internal"              // 500: everything else
	EABORTED       = "request_aborted"       // 400: the client went away, or cancelled the request
	ESLOWBODY      = "body_too_slow"         // 408: a request body did not arrive in time
	ERANGE         = "range_not_satisfiable" // 416: a download's Range names no bytes of the file
	EPRECONDITION  = "precondition_failed"   // 412: a download's If-Match or If-Unmodified-Since failed
	EREFERENCE     = "artifact_is_reference" // 409: a URI artifact nobody serves the bytes of
	EUNAUTHORIZED  = "unauthorized"          // 401: no API key, or one that is not valid
	EFORBIDDEN     = "forbidden"             // 403: an API key that may not use this agent
	EINTERRUPTED   = "interrupted"           // 503: the server stopped (shut down or died) while a step ran
	ECANCELLED     = "cancelled"             // 409: a client cancelled the step while it ran
)

// Error is a domain error: a code clients and callers may branch on and a
// message fit to show a client.
type Error struct {
	Code    string
	Message string
	// StepID names the step a plugin failure was recorded on, if any.
	StepID string
	// RetryAfter, in seconds, for EUNAVAILABLE.
	RetryAfter int
}

func (e *Error) Error() string { return e.Message }

// PluginFailure is the failure of a handler call that was the plugin's
// doing: it trapped, exited, ran past its time or out of memory, was
// stopped by a host limit or cancelled, or set a result the host refuses.
// Every one is made by NewPluginFailure; a caller tells one from any other
// error with errors.As, never by its code or text.
//
// It is an *Error too: its fields Code, Message and StepID are those of
// the *Error it unwraps to, which errors.As finds, and so do ErrorCode,
// ErrorMessage and the HTTP mapping. Its Code is EPLUGIN (502), or
// ETIMEOUT (504) when its Cause is CauseTimeout; its Message is fit for a
// client; its StepID names the step it was recorded on, once it was.
type PluginFailure struct {
	// Cause says why the plugin failed, as one of the Cause constants:
	// what metrics count failures by.
	Cause string
	*clientError
}

// clientError is the *Error a PluginFailure is, under a name that leaves
// PluginFailure its Error method.
type clientError = Error

// Why a plugin failed: a bounded set, for metrics (PluginFailure.Cause).
const (
	CauseTimeout      = "timeout"       // it ran past a time limit
	CauseTrap         = "trap"          // it trapped (a panic, an unreachable, a bad memory access)
	CauseOutOfMemory  = "out_of_memory" // it trapped after its memory limit refused it more
	CauseExit         = "exit"          // it exited (proc_exit)
	CauseCancelled    = "cancelled"     // it was stopped: the task was deleted, the server shut down
	CauseHostLimit    = "host_limit"    // a host function stopped it (too many host calls)
	CauseBadResult    = "bad_result"    // its result was refused or could not be read
	CauseHandlerError = "handler_error" // its result carried an error
	CauseReturnCode   = "return_code"   // its handler returned a code other than 0
	CauseOther        = "other"
)

// NewPluginFailure returns a plugin's failure for cause (a Cause constant;
// "" is CauseOther), with a message fit for a client. It is the one place
// a plugin's failure is made and its code chosen: ETIMEOUT for
// CauseTimeout, EPLUGIN for every other cause.
func NewPluginFailure(cause, format string, args ...any) *PluginFailure {
	code := EPLUGIN
	switch cause {
	case CauseTimeout:
		code = ETIMEOUT
	case "":
		cause = CauseOther
	}
	return &PluginFailure{Cause: cause, clientError: &Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// Unwrap returns the failure as the *Error a client sees.
func (f *PluginFailure) Unwrap() error { return f.clientError }

// of is the failure f of handler h as its client is told it: naming the
// handler, with at most maxPluginText of the plugin's own text (its
// error, or its function names in wazero's account of a trap).
func (f *PluginFailure) of(h Handler) *PluginFailure {
	return NewPluginFailure(f.Cause, "%s handler failed: %s", h, cutText(f.Message, maxPluginText))
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	} else if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err: the message of its
// *Error, or a generic text for internal errors.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	} else if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error"
}

// Bounds on text a plugin hands over that ends up in a message: a client
// sees at most maxPluginText bytes of it (a failure, a rejection reason),
// and a server log line at most maxLogText.
const (
	maxPluginText = 4096
	maxLogText    = 512
)

// cutText returns s cut to at most n bytes, at a character boundary, saying
// how much was cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// logText is an error's message as a server log line carries it: cut to
// maxLogText (the log handler escapes what it needs to). Internal errors
// are logged in full: their text is ours.
func logText(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return cutText(e.Message, maxLogText)
	}
	return err.Error()
}

// notFound is the error for an unknown or malformed id.
func notFound(kind, id string) *Error {
	return Errorf(ENOTFOUND, "%s %q not found", kind, id)
}
