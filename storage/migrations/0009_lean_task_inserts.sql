-- A task's insert keeps its agent's count in one statement rather than
-- three, and the index of tasks by agent and creation order goes: tasks
-- are listed by position (0007), and tasks_by_position serves every look by
-- agent. Together they had made creating a task 15% dearer.

DROP INDEX tasks_by_agent;

DROP TRIGGER task_counted;

-- The insert gives the task its agent's next position (storage.CreateTask).
CREATE TRIGGER task_counted AFTER INSERT ON tasks WHEN NEW.position IS NOT NULL
BEGIN
	INSERT INTO agent_tasks (agent, count, next) VALUES (NEW.agent, 1, NEW.position + 1)
		ON CONFLICT (agent) DO UPDATE SET count = count + 1, next = max(next, excluded.next);
END;

-- An insert that does not gets it here.
CREATE TRIGGER task_positioned AFTER INSERT ON tasks WHEN NEW.position IS NULL
BEGIN
	INSERT INTO agent_tasks (agent, count, next) VALUES (NEW.agent, 0, 1) ON CONFLICT (agent) DO NOTHING;
	UPDATE tasks SET position = (SELECT next FROM agent_tasks WHERE agent = NEW.agent) WHERE seq = NEW.seq;
	UPDATE agent_tasks SET count = count + 1, next = next + 1 WHERE agent = NEW.agent;
END;
