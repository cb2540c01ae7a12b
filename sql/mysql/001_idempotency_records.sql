-- nestjs-idempotency: the table of the MySQL/MariaDB store (module option `mysql`).
--
-- Apply it with your other migrations, or let the module create it at boot with
-- `mysql: { ..., ensureSchema: true }`, which runs the same statement for the configured table.
-- Another name: replace `idempotency_records` below and pass it as `mysql: { table: 'your_name' }`
-- (or 'database.your_name').
--
-- Needs MySQL 5.7.7+ (8.0, 8.4, 9.x) or MariaDB 10.2+, InnoDB. One row per record. Times are
-- the database's clock in UTC (UTC_TIMESTAMP(6)), never the app's. Rows past expires_at are
-- dead: claims take them over and the module deletes them in batches.

CREATE TABLE IF NOT EXISTS `idempotency_records` (
  -- The record key: a hash of route, scope and Idempotency-Key, never the client's raw key.
  `key` VARBINARY(512) NOT NULL,
  -- 'p' pending (a handler holds the lease) or 'c' completed (the response is stored).
  state CHAR(1) CHARACTER SET ascii NOT NULL,
  -- Hash of the request the key was first used with; '' when it is not compared.
  fingerprint VARBINARY(255) NOT NULL,
  -- Owner token of the pending record (fencing); NULL once completed.
  owner VARBINARY(255) NULL,
  -- The stored response: meta (status, headers, body kind) and body, opaque to the database.
  meta MEDIUMTEXT CHARACTER SET utf8mb4 NULL,
  body LONGBLOB NULL,
  completed_at DATETIME(6) NULL,
  -- End of the lease (pending) or of the retention (completed), UTC.
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (`key`),
  -- The expiry sweeper's index: it deletes rows with expires_at in the past, in small batches.
  KEY expires_at_idx (expires_at)
) ENGINE=InnoDB;
