-- Whether the data directory's API needs a key. Set when the first key is
-- created and when a server starts with --require-auth; cleared only by
-- "agentrt keys open". Revoking the last key leaves it set: a server with
-- no key left answers 401, it does not open. One row, or none (a data
-- directory that never needed keys).
CREATE TABLE auth_required (
	one        INTEGER PRIMARY KEY CHECK (one = 1),
	required   INTEGER NOT NULL CHECK (required IN (0, 1)),
	changed_at INTEGER NOT NULL, -- Unix milliseconds
	reason     TEXT    NOT NULL  -- what set or cleared it, for "keys list"
);

-- A directory that has keys already needs them from now on. One that had
-- keys and revoked the last before this migration cannot be told from one
-- that never had any: it stays open until a key is made or a server starts
-- with --require-auth.
INSERT INTO auth_required (one, required, changed_at, reason)
	SELECT 1, 1, CAST(strftime('%s', 'now') AS INTEGER) * 1000, 'keys existed when agentrt learnt to keep this'
	WHERE EXISTS (SELECT 1 FROM api_keys);
