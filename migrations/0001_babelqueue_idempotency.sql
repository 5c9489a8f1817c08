-- babelqueue-serverless: the D1Store's tables (`wrangler d1 migrations apply <database>`).
-- The same text as `d1IdempotencyTableSql()` for the default table name; a test checks they agree.
--
-- babelqueue_idempotency: one row per (namespace, id) key.
--   status      'in-flight' (claimed, lease running) or 'done' (committed)
--   token       the fencing token of the claim (kept once done, so a commit can be recognised)
--   fingerprint the payload fingerprint of the claim / commit, when one was given
--   expires_at  epoch ms on the database's clock: in-flight, end of the lease; done, end of the retention
-- babelqueue_idempotency_fence: one row, rewritten by every transactional commit; its CHECK fails,
--   aborting the whole batch (the handler's statements included), when the claim is no longer held.
CREATE TABLE IF NOT EXISTS babelqueue_idempotency (
  key TEXT NOT NULL PRIMARY KEY,
  status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
  token TEXT,
  fingerprint TEXT,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS babelqueue_idempotency_expires_at_idx ON babelqueue_idempotency (expires_at);
CREATE TABLE IF NOT EXISTS babelqueue_idempotency_fence (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  held INTEGER NOT NULL CONSTRAINT babelqueue_fence_lost CHECK (held = 1)
);
