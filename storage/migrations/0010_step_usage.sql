-- Saving a step no longer rewrites its task's row: the step keeps its own
-- plugin time, and a task's steps and their time are read where they are.
-- Adding them up on the task's row was a tenth of an execute-step's cost.
--
-- steps_by_task carries each step's time, so that a task's count and time
-- are read from the index alone (storage.queryTask), at most the task's
-- step limit of entries, once for as long as the task stays cached.
--
-- tasks.plugin_ns keeps the time of the task's other handler calls (its
-- task handler's, its artifact handler's) and of the steps saved before
-- this migration, whose own time is 0 here: a task's plugin time is
-- tasks.plugin_ns plus its steps'. Its step count is its rows in steps, as
-- step_count was kept (migration 0004).

ALTER TABLE steps ADD COLUMN plugin_ns INTEGER NOT NULL DEFAULT 0;

DROP INDEX steps_by_task;
CREATE INDEX steps_by_task ON steps (task_id, seq, plugin_ns);

ALTER TABLE tasks DROP COLUMN step_count;
