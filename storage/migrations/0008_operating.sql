-- What operating agentrt needs of the schema: a task's metadata, deleting
-- tasks, steps marked running before their handler runs, and API keys.

-- A task's title, description and version, the client's to set and
-- change; NULL when unset.
ALTER TABLE tasks ADD COLUMN title TEXT;
ALTER TABLE tasks ADD COLUMN description TEXT;
ALTER TABLE tasks ADD COLUMN version TEXT;

-- Tasks can be deleted, which breaks the promise 0003 made of seq ("rows
-- are never deleted"): SQLite gives a new row max(rowid)+1, the seq of a
-- deleted task that was the newest, and a client paging "after seq N"
-- would skip the new task that took N. seq_floors keeps, for tasks, the
-- highest seq a deleted task held; a new task takes one past the larger
-- of it and the table's highest, so that a seq is never given twice.
-- Steps, artifacts and log rows need no floor: their seq orders the rows
-- of one task, which are deleted together, and a new row still sorts
-- after every row of its task that remains.
CREATE TABLE seq_floors (
	name TEXT PRIMARY KEY, -- the table
	seq  INTEGER NOT NULL  -- the highest seq a deleted row of it held
) WITHOUT ROWID;

-- Deleted tasks whose bytes (artifacts/<task>/, workspaces/<task>/) may
-- still be on disk: written in the transaction that deletes the rows,
-- removed once the bytes are, and finished at the next start by a process
-- that died in between.
CREATE TABLE task_deletions (
	task_id TEXT PRIMARY KEY
) WITHOUT ROWID;

-- A step is 'running' from just before its handler runs until it is
-- recorded. One left running by a process that died is marked failed
-- ("interrupted") at the next start, found through this index, which
-- holds only the steps running.
CREATE INDEX steps_running ON steps (seq) WHERE status = 'running';

-- API keys. Only a hash of each is kept: SHA-256 of the whole key, which
-- is 256 random bits (a slow password hash buys nothing against a secret
-- that cannot be guessed, and would cost every request).
CREATE TABLE api_keys (
	id           TEXT    PRIMARY KEY,     -- the key's public part, shown by "keys list"
	name         TEXT    NOT NULL UNIQUE,
	hash         BLOB    NOT NULL,        -- SHA-256 of the whole key
	agents       TEXT,                    -- JSON array of the agents it may use; NULL: every agent
	created_at   INTEGER NOT NULL,        -- Unix milliseconds
	last_used_at INTEGER                  -- Unix milliseconds; NULL: never used
);
