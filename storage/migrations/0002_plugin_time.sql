-- The wall-clock time a task's handler calls have used, for the per-task
-- time budget.
ALTER TABLE tasks ADD COLUMN plugin_ms INTEGER NOT NULL DEFAULT 0;
