-- A task's log (what its task handler and artifact handlers logged) becomes
-- rows appended once per handler call. It was one JSON column that every
-- upload read, decoded, extended and wrote back whole, so each upload cost
-- more than the last. log_bytes keeps the size the task's log limit counts,
-- so that a new row is checked without reading the old ones.
--
-- Plugin time moves to nanoseconds: in milliseconds, calls shorter than one
-- were rounded to nothing and never counted against the task's budget.
--
-- step_count keeps how many steps a task holds, for the per-task limit.

CREATE TABLE task_logs (
	seq     INTEGER PRIMARY KEY,
	task_id TEXT    NOT NULL REFERENCES tasks (id),
	records TEXT    NOT NULL, -- JSON array of one handler call's log records
	bytes   INTEGER NOT NULL  -- what the records count against the task's log limit
);
CREATE INDEX task_logs_by_task ON task_logs (task_id, seq);

-- Existing logs move over as one row per task, counted by their JSON text,
-- which is never less than what the limit counts for the same records.
INSERT INTO task_logs (task_id, records, bytes)
	SELECT id, logs, length(CAST(logs AS BLOB)) FROM tasks WHERE logs IS NOT NULL ORDER BY seq;
ALTER TABLE tasks ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET log_bytes = length(CAST(logs AS BLOB)) WHERE logs IS NOT NULL;

ALTER TABLE tasks ADD COLUMN plugin_ns INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET plugin_ns = plugin_ms * 1000000;

ALTER TABLE tasks ADD COLUMN step_count INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET step_count = (SELECT COUNT(*) FROM steps WHERE steps.task_id = tasks.id);

ALTER TABLE tasks DROP COLUMN logs;
ALTER TABLE tasks DROP COLUMN plugin_ms;
