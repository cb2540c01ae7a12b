-- nestjs-idempotency: what the PostgreSQL store keeps to list records by state (operators:
-- IdempotencyRecords.list(), counts, abandoned half-done runs). Apply it after
-- 001_idempotency_records.sql (and 002 if you use it), with your other migrations, or let the
-- module apply it at boot with `postgres: { ..., ensureSchema: true }`. The store needs it:
-- without these columns its claims fail with a message naming this file.
--
-- Another records' table name: replace `idempotency_records` everywhere below (the table, and
-- the indexes' name prefix), as in 001.
--
-- Adding the columns changes no row (no default to write but a constant). The indexes are built
-- under a lock that holds writes back while they build: on a large table, create them yourself
-- first with CREATE INDEX CONCURRENTLY (same names and definitions), and this file skips them.

ALTER TABLE idempotency_records
  -- The route as events name it ('POST /payments', 'run:<scope>'): clear text, filterable.
  ADD COLUMN IF NOT EXISTS route text,
  -- The client's key and the record's owner, encoded (sealed with `encryption`) by the module.
  ADD COLUMN IF NOT EXISTS label text,
  -- When the current claim was made: running and stuck records are listed from it.
  ADD COLUMN IF NOT EXISTS claimed_at timestamptz,
  -- A half-done run (its steps kept, its claim ended) was reported abandoned; a new claim clears it.
  ADD COLUMN IF NOT EXISTS reported boolean NOT NULL DEFAULT false;

-- Completed records, newest or oldest first: partial, so a claim never touches it.
CREATE INDEX IF NOT EXISTS idempotency_records_completed_at_idx
  ON idempotency_records (completed_at) WHERE state = 'c';

-- Claims (running, stuck, half done): the few pending rows, so listing them never reads the
-- completed ones.
CREATE INDEX IF NOT EXISTS idempotency_records_claimed_at_idx
  ON idempotency_records (claimed_at) WHERE state = 'p';
