-- nestjs-idempotency: what the MySQL/MariaDB store keeps to list records by state (operators:
-- IdempotencyRecords.list(), counts, abandoned half-done runs). Apply it once, after
-- 001_idempotency_records.sql (and 002 if you use it), with your other migrations, or let the
-- module apply it at boot with `mysql: { ..., ensureSchema: true }`. The store needs it: without
-- these columns its claims fail with a message naming this file.
--
-- Another records' table name: replace `idempotency_records` below, as in 001. Unlike 001 and
-- 002 this file cannot be applied twice (MySQL has no ADD COLUMN IF NOT EXISTS).

ALTER TABLE `idempotency_records`
  -- The route as events name it ('POST /payments', 'run:<scope>'): clear text, filterable.
  ADD COLUMN route TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- The client's key and the record's owner, encoded (sealed with `encryption`) by the module.
  ADD COLUMN label TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- When the current claim was made, UTC: running and stuck records are listed from it.
  ADD COLUMN claimed_at DATETIME(6) NULL,
  -- A half-done run (its steps kept, its claim ended) was reported abandoned; a new claim clears it.
  ADD COLUMN reported BOOLEAN NOT NULL DEFAULT FALSE,
  -- Completed records by completion time, and the few pending ones (running, stuck, half done)
  -- apart from them: listing either never reads the other.
  ADD KEY state_completed_at_idx (state, completed_at);
