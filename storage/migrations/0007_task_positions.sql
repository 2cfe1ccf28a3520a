-- GET /tasks finds a page by position instead of counting the agent's
-- tasks and skipping to it: each task holds its position in its agent's
-- list (1, 2, ...), and each agent its number of tasks and the position
-- its next task takes (agent_tasks). Triggers keep them in the
-- transaction that inserts or deletes a task, whatever inserts or deletes
-- it. A deleted task leaves its position behind as a gap (task_gaps),
-- which a page's first position is found past.

ALTER TABLE tasks ADD COLUMN position INTEGER;
UPDATE tasks SET position = ranked.n
	FROM (SELECT seq, row_number() OVER (PARTITION BY agent ORDER BY seq) AS n FROM tasks) AS ranked
	WHERE tasks.seq = ranked.seq;
CREATE UNIQUE INDEX tasks_by_position ON tasks (agent, position);

CREATE TABLE agent_tasks (
	agent TEXT    NOT NULL PRIMARY KEY,
	count INTEGER NOT NULL, -- the agent's tasks
	next  INTEGER NOT NULL  -- the position its next task takes
) WITHOUT ROWID;
INSERT INTO agent_tasks (agent, count, next) SELECT agent, COUNT(*), COUNT(*) + 1 FROM tasks GROUP BY agent;

CREATE TABLE task_gaps (
	agent    TEXT    NOT NULL,
	position INTEGER NOT NULL, -- a deleted task's
	PRIMARY KEY (agent, position)
) WITHOUT ROWID;

-- A task takes its agent's next position: storage.CreateTask gives it,
-- and an insert that does not gets it here.
CREATE TRIGGER task_counted AFTER INSERT ON tasks
BEGIN
	INSERT INTO agent_tasks (agent, count, next) VALUES (NEW.agent, 0, 1) ON CONFLICT (agent) DO NOTHING;
	UPDATE tasks SET position = (SELECT next FROM agent_tasks WHERE agent = NEW.agent)
		WHERE NEW.position IS NULL AND seq = NEW.seq;
	UPDATE agent_tasks SET count = count + 1, next = max(next, coalesce(NEW.position, next)) + 1
		WHERE agent = NEW.agent;
END;

CREATE TRIGGER task_uncounted AFTER DELETE ON tasks
BEGIN
	UPDATE agent_tasks SET count = count - 1 WHERE agent = OLD.agent;
	INSERT INTO task_gaps (agent, position) VALUES (OLD.agent, OLD.position);
END;
