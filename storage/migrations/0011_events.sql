-- Each task's event log: what happened to it, in the order it happened,
-- for clients that watch it (GET .../events, as Server-Sent Events) and
-- for those that reconnect and replay what they missed. id counts a
-- task's events from 1 and only grows: tasks.last_event is the highest
-- given, and the writer gives the next event one more.
--
-- Rows are appended in the order written (seq), so that a commit writes
-- the table's last page, not one page a task: an event costs its row and
-- its entry in events_by_task.
CREATE TABLE events (
	seq        INTEGER PRIMARY KEY,       -- the order written: rows are appended
	task_id    TEXT    NOT NULL,
	id         INTEGER NOT NULL,
	type       TEXT    NOT NULL,          -- "step.progress", ...
	step_id    TEXT,                      -- the step it is about, if any
	created_at INTEGER NOT NULL,          -- Unix milliseconds
	data       TEXT    NOT NULL,          -- a JSON object
	trimmable  INTEGER NOT NULL           -- 1 for progress and log events: trimmed first
);
CREATE UNIQUE INDEX events_by_task ON events (task_id, id);

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

ALTER TABLE tasks ADD COLUMN last_event INTEGER NOT NULL DEFAULT 0;

-- A step's end is an event of its own row, not of events: most steps are
-- quick, and their end is their only event, which a row and an index
-- entry of its own would cost a step's save more than all else it
-- writes. end_event is its id (NULL until it ends), end_type its type
-- (step.completed, step.failed, step.cancelled).
ALTER TABLE steps ADD COLUMN end_event INTEGER;
ALTER TABLE steps ADD COLUMN end_type TEXT;
