-- Each task's event log: what happened to it, in the order it happened,
-- for clients that watch it (GET .../events, as Server-Sent Events) and
-- for those that reconnect and replay what they missed. id counts a
-- task's events from 1 and only grows: the writer gives each event one
-- more than the highest the task holds, and never removes the highest.
CREATE TABLE events (
	task_id    TEXT    NOT NULL,
	id         INTEGER NOT NULL,
	type       TEXT    NOT NULL,          -- "step.progress", ...
	step_id    TEXT,                      -- the step it is about, if any
	created_at INTEGER NOT NULL,          -- Unix milliseconds
	data       TEXT    NOT NULL,          -- a JSON object
	trimmable  INTEGER NOT NULL,          -- 1 for progress and log events: trimmed first
	PRIMARY KEY (task_id, id)
) WITHOUT ROWID;

-- What each task's trimmable events hold, and what was trimmed, so that a
-- bound is held without counting the log. A row exists once a task has a
-- trimmable event.
CREATE TABLE event_usage (
	task_id         TEXT    PRIMARY KEY,
	count           INTEGER NOT NULL,     -- trimmable events held
	bytes           INTEGER NOT NULL,     -- their data's bytes
	trimmed         INTEGER NOT NULL,     -- events trimmed so far
	trimmed_through INTEGER NOT NULL      -- the highest id trimmed, 0 for none
) WITHOUT ROWID;
