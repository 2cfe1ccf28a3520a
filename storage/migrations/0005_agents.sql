-- One data directory serves several agents. Each task belongs to the agent
-- that created it (tasks from before are the unnamed agent's, ''), and is
-- listed and found only through it. Each step records the agent and the
-- build of its plugin (the sha256 of the plugin file) that ran it; NULL for
-- a planned step not yet run and for steps from before.

ALTER TABLE tasks ADD COLUMN agent TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_by_agent ON tasks (agent, seq);

ALTER TABLE steps ADD COLUMN agent TEXT;
ALTER TABLE steps ADD COLUMN build TEXT;
