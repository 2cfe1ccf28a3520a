-- seq stays the creation order without AUTOINCREMENT: rows are never
-- deleted, so SQLite's max(rowid)+1 never reuses one, and an insert no
-- longer reads and rewrites sqlite_sequence (a page in every commit).
-- Each table is rebuilt as SQLite's ALTER TABLE documentation describes;
-- the migration runner turns foreign keys off and checks them before the
-- commit. The rebuild needs free disk about twice the size of the three
-- tables (the copies and the WAL holding them) until it commits.

CREATE TABLE tasks_new (
	seq              INTEGER PRIMARY KEY,
	id               TEXT    NOT NULL UNIQUE,
	input            TEXT,             -- NULL when the client sent none
	additional_input TEXT    NOT NULL, -- a JSON object
	logs             TEXT,             -- JSON array of the task handler's log records
	created_at       INTEGER NOT NULL, -- Unix milliseconds
	plugin_ms        INTEGER NOT NULL DEFAULT 0 -- time the task's handler calls have used
);
INSERT INTO tasks_new (seq, id, input, additional_input, logs, created_at, plugin_ms)
	SELECT seq, id, input, additional_input, logs, created_at, plugin_ms FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;

CREATE TABLE steps_new (
	seq               INTEGER PRIMARY KEY,
	id                TEXT    NOT NULL UNIQUE,
	task_id           TEXT    NOT NULL REFERENCES tasks (id),
	name              TEXT,
	status            TEXT    NOT NULL,
	input             TEXT,
	additional_input  TEXT    NOT NULL,
	output            TEXT,
	additional_output TEXT,             -- JSON, or NULL
	is_last           INTEGER NOT NULL,
	planned           INTEGER NOT NULL, -- planned by the task handler
	logs              TEXT,             -- JSON array of log records
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL
);
INSERT INTO steps_new (seq, id, task_id, name, status, input, additional_input, output,
                       additional_output, is_last, planned, logs, created_at, updated_at)
	SELECT seq, id, task_id, name, status, input, additional_input, output,
	       additional_output, is_last, planned, logs, created_at, updated_at FROM steps;
DROP TABLE steps;
ALTER TABLE steps_new RENAME TO steps;
CREATE INDEX steps_by_task ON steps (task_id, seq);
CREATE INDEX steps_created ON steps (task_id, status, seq) WHERE status = 'created';

CREATE TABLE artifacts_new (
	seq           INTEGER PRIMARY KEY,
	id            TEXT    NOT NULL UNIQUE,
	task_id       TEXT    NOT NULL REFERENCES tasks (id),
	step_id       TEXT    REFERENCES steps (id),
	agent_created INTEGER NOT NULL,
	file_name     TEXT    NOT NULL,
	relative_path TEXT    NOT NULL,
	size          INTEGER NOT NULL,
	created_at    INTEGER NOT NULL
);
INSERT INTO artifacts_new (seq, id, task_id, step_id, agent_created, file_name, relative_path, size, created_at)
	SELECT seq, id, task_id, step_id, agent_created, file_name, relative_path, size, created_at FROM artifacts;
DROP TABLE artifacts;
ALTER TABLE artifacts_new RENAME TO artifacts;
CREATE INDEX artifacts_by_task ON artifacts (task_id, seq);
CREATE INDEX artifacts_by_step ON artifacts (step_id, seq);
