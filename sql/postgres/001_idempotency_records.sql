-- nestjs-idempotency: the table of the PostgreSQL store (module option `postgres`).
--
-- Apply it with your other migrations, or let the module create it at boot with
-- `postgres: { ..., ensureSchema: true }`, which runs the same statements for the configured
-- table. Another name: replace `idempotency_records` everywhere below (the table, and the
-- index's name prefix) and pass it as `postgres: { table: 'your_name' }` (or 'schema.your_name';
-- the store quotes it, so write it in lower case here or quote it here as well).
--
-- One row per record. Times are the database's clock (statement_timestamp()), never the app's.
-- Rows past expires_at are dead: claims take them over and the module deletes them in batches.

CREATE TABLE IF NOT EXISTS idempotency_records (
  -- The record key: a hash of route, scope and Idempotency-Key, never the client's raw key.
  key text PRIMARY KEY,
  -- 'p' pending (a handler holds the lease) or 'c' completed (the response is stored).
  state "char" NOT NULL CHECK (state IN ('p', 'c')),
  -- A duplicate waits for this record: completion and release NOTIFY the store's channel.
  waiting boolean NOT NULL DEFAULT false,
  -- Hash of the request the key was first used with; '' when it is not compared.
  fingerprint text NOT NULL,
  -- Owner token of the pending record (fencing); NULL once completed.
  owner text,
  -- The stored response: meta (status, headers, body kind) and body, opaque to the database.
  meta text,
  body bytea,
  completed_at timestamptz,
  -- End of the lease (pending) or of the retention (completed).
  expires_at timestamptz NOT NULL
);

-- The expiry sweeper's index: it deletes rows with expires_at in the past, in small batches.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx
  ON idempotency_records (expires_at);
