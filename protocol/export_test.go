package protocol

// OnLockWait has a tell f whenever a step or an upload of a task waits
// for another holding the task's lock.
func OnLockWait(a *Agent, f func(taskID string)) { a.locks.waiting = f }

// MaxPluginText is how much of a plugin's own text a client sees.
const MaxPluginText = maxPluginText
