-- Tasks, steps and artifacts of the Agent Protocol. seq gives each table its
-- stable creation order; ids are the UUIDs clients see.

CREATE TABLE tasks (
	seq              INTEGER PRIMARY KEY AUTOINCREMENT,
	id               TEXT    NOT NULL UNIQUE,
	input            TEXT,             -- NULL when the client sent none
	additional_input TEXT    NOT NULL, -- a JSON object
	logs             TEXT,             -- JSON array of the task handler's log records
	created_at       INTEGER NOT NULL  -- Unix milliseconds
);

CREATE TABLE steps (
	seq               INTEGER PRIMARY KEY AUTOINCREMENT,
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
CREATE INDEX steps_by_task ON steps (task_id, seq);
CREATE INDEX steps_created ON steps (task_id, status, seq) WHERE status = 'created';

CREATE TABLE artifacts (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT    NOT NULL UNIQUE,
	task_id       TEXT    NOT NULL REFERENCES tasks (id),
	step_id       TEXT    REFERENCES steps (id),
	agent_created INTEGER NOT NULL,
	file_name     TEXT    NOT NULL,
	relative_path TEXT    NOT NULL,
	size          INTEGER NOT NULL,
	created_at    INTEGER NOT NULL
);
CREATE INDEX artifacts_by_task ON artifacts (task_id, seq);
CREATE INDEX artifacts_by_step ON artifacts (step_id, seq);
