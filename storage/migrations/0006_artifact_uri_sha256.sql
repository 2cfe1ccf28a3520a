-- URI artifacts (the artifact-management RFC): an artifact may be a
-- reference to bytes held elsewhere; uri holds it (NULL for bytes held
-- here). sha256 is the hex sha256 of an artifact's bytes, for downloads'
-- ETag; NULL for a URI artifact, and for artifacts recorded before it was
-- kept until their first download computes it.

ALTER TABLE artifacts ADD COLUMN uri TEXT;
ALTER TABLE artifacts ADD COLUMN sha256 TEXT;
