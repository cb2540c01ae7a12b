-- nestjs-idempotency: the steps table of the MySQL/MariaDB store, for resumable handlers (option
-- `resumable`, IdempotencyService.step()). Apply it after 001_idempotency_records.sql, with your
-- other migrations, or let the module create it at boot with `mysql: { ..., ensureSchema: true }`.
-- An app without resumable handlers may leave it out: nothing else reads or writes it.
--
-- Another records' table name: this table is that name and `_steps`, in the same database.
-- Replace `idempotency_records` below accordingly. (A name longer than 64 characters is cut and
-- hashed: `mysqlStepsTableName('your_name')` from the package says what it is.)
--
-- One row per step a run recorded under a record key. Steps are kept apart from the record: they
-- outlive the record's lease and its release, so that a retry resumes after them. A resumable
-- run's completion expires them; rows past expires_at are dead and deleted in batches.

CREATE TABLE IF NOT EXISTS `idempotency_records_steps` (
  -- The record key the step was recorded under (see idempotency_records.key).
  `key` VARBINARY(512) NOT NULL,
  -- The step's place in the handler's order of step() calls, from 0.
  idx INT UNSIGNED NOT NULL,
  -- The step's name, as the handler gave it: a retry checks it is still the same step.
  name TEXT CHARACTER SET utf8mb4 NOT NULL,
  -- Hash of the request the run that recorded it was for: another payload may not resume it.
  fingerprint VARBINARY(255) NOT NULL,
  -- The step's result, encoded by the module: opaque to the database.
  meta MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
  body LONGBLOB NOT NULL,
  -- When the step is forgotten, UTC.
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (`key`, idx),
  -- The expiry sweeper's index.
  KEY expires_at_idx (expires_at)
) ENGINE=InnoDB;
