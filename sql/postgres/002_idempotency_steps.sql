-- nestjs-idempotency: the steps table of the PostgreSQL store, for resumable handlers (option
-- `resumable`, IdempotencyService.step()). Apply it after 001_idempotency_records.sql, with your
-- other migrations, or let the module create it at boot with `postgres: { ..., ensureSchema: true }`.
-- An app without resumable handlers may leave it out: nothing else reads or writes it.
--
-- Another records' table name: this table is that name and `_steps` (the index too), in the same
-- schema. Replace `idempotency_records` everywhere below accordingly. (A name longer than 63
-- bytes is cut and hashed: `postgresStepsTableName('your_name')` from the package says what it is.)
--
-- One row per step a run recorded under a record key. Steps are kept apart from the record: they
-- outlive the record's lease and its release, so that a retry resumes after them. A resumable
-- run's completion deletes them; rows past expires_at are dead and deleted in batches.

CREATE TABLE IF NOT EXISTS idempotency_records_steps (
  -- The record key the step was recorded under (see idempotency_records.key).
  key text NOT NULL,
  -- The step's place in the handler's order of step() calls, from 0.
  idx integer NOT NULL,
  -- The step's name, as the handler gave it: a retry checks it is still the same step.
  name text NOT NULL,
  -- Hash of the request the run that recorded it was for: another payload may not resume it.
  fingerprint text NOT NULL,
  -- The step's result, encoded by the module: opaque to the database.
  meta text NOT NULL,
  body bytea NOT NULL,
  -- When the step is forgotten.
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (key, idx)
);

-- The expiry sweeper's index.
CREATE INDEX IF NOT EXISTS idempotency_records_steps_expires_at_idx
  ON idempotency_records_steps (expires_at);
