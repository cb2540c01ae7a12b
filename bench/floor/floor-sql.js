// The floor of issue 41 on PostgreSQL (pg) and MySQL/MariaDB (mysql2): the least work a fenced
// idempotency layer must do there, beside bench/floor/floor.js's on Redis and with its interface
// (token, claim, pending, complete, release, run). One row per key in a table of its own: the
// claim's owner token while the work runs (outcome NULL), the outcome once it is done (token
// NULL), and when the row stops counting (expires_at, the database's clock): the lease, then the
// retention. An expired row is dead: a claim takes it over.
//
// - PostgreSQL, one statement per call: the claim reads the live row and inserts only when there
//   is none (so a replay or a 409 writes nothing; `ON CONFLICT DO UPDATE ... WHERE expired` on a
//   live row would lock it, taking a transaction id and a WAL flush), taking an expired row over
//   under its row lock. A row the statement's snapshot cannot see (inserted, or taken over, by a
//   concurrent claim) makes the INSERT wait and then leave it: not claimed, no row read: in
//   progress. Named (prepared) statements, as this library's store sends them.
// - MySQL/MariaDB: the claim is `INSERT ... ON DUPLICATE KEY UPDATE`, taking an expired row over
//   under its row lock and leaving a live one as it is; the pool runs without CLIENT_FOUND_ROWS,
//   so affectedRows says which (1 inserted, 2 taken over, 0 left). When the key is held a second
//   statement reads the row (MySQL cannot return the row it did not change).
// - complete: one UPDATE fenced by the token; release: one DELETE fenced by the token. A caller
//   whose row another claim took over changes nothing. (One whose lease ran out and whose row
//   nobody took over still owns it, and completes it, as this library's SQL stores do.)
//
// Left out, against this library's SQL stores: everything floor.js lists, and the sweeper (dead
// rows stay until a claim takes them over; its index on expires_at too), LISTEN/NOTIFY or polling
// for waiters, the schema check and migrations, transactions of the app's.
const { FloorConflict, PENDING, pending, run, token } = require('./floor');

/** The table: a token xor an outcome, and expires_at; no secondary index. */
const DDL = {
  postgres: (t) =>
    `CREATE TABLE IF NOT EXISTS "${t}" (key text PRIMARY KEY, token text, outcome text,
  expires_at timestamptz NOT NULL)`,
  mysql: (t) =>
    `CREATE TABLE IF NOT EXISTS \`${t}\` (\`key\` VARBINARY(512) PRIMARY KEY,
  token VARCHAR(64) CHARACTER SET ascii NULL, outcome LONGTEXT CHARACTER SET utf8mb4 NULL,
  expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB`,
};

/** PostgreSQL: a pg Pool and the statements, each one round trip. */
function postgres(url, t) {
  const { Pool } = require('pg');
  // Kept warm between measurements, as the bench's lanes of this library keep theirs.
  const pool = new Pool({ connectionString: url, idleTimeoutMillis: 0 });
  const later = (ms) => `statement_timestamp() + ${ms}::float8 * interval '1 millisecond'`;
  const query = (name, text, values) => pool.query({ name: `floor_${name}`, text, values });
  return {
    pool,
    ddl: (text) => pool.query(text),
    /** $1 key, $2 token, $3 lease ms. One row: claimed, and the live row the snapshot saw. */
    claim: async (key, token, leaseMs) => {
      const { rows } = await query(
        'claim',
        `WITH live AS (
  SELECT token, outcome FROM "${t}" WHERE key = $1 AND expires_at > statement_timestamp()
), claimed AS (
  INSERT INTO "${t}" AS r (key, token, expires_at)
  SELECT $1::text, $2::text, ${later('$3')} WHERE NOT EXISTS (SELECT FROM live)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, outcome = NULL,
    expires_at = excluded.expires_at
  WHERE r.expires_at <= statement_timestamp()
  RETURNING 1
)
SELECT EXISTS (SELECT FROM claimed) AS claimed, live.token, live.outcome
FROM (SELECT) AS one LEFT JOIN live ON true`,
        [key, token, leaseMs],
      );
      const [row] = rows;
      return row.claimed ? null : (row.token ?? row.outcome ?? PENDING);
    },
    complete: async (key, token, outcome, ttlMs) =>
      (
        await query(
          'complete',
          `UPDATE "${t}" SET token = NULL, outcome = $3, expires_at = ${later('$4')}
WHERE key = $1 AND token = $2`,
          [key, token, outcome, ttlMs],
        )
      ).rowCount === 1,
    release: async (key, token) =>
      (await query('release', `DELETE FROM "${t}" WHERE key = $1 AND token = $2`, [key, token]))
        .rowCount === 1,
  };
}

/** MySQL/MariaDB: a mysql2 pool (text protocol, as this library's store queries) and the statements. */
function mysql(url, t) {
  const pool = require('mysql2/promise').createPool({ uri: url, flags: ['-FOUND_ROWS'] });
  const NOW = 'UTC_TIMESTAMP(6)';
  const EXPIRED = `expires_at <= ${NOW}`;
  const later = `${NOW} + INTERVAL ? MICROSECOND`;
  const affected = async (text, values) => (await pool.query(text, values))[0].affectedRows;
  const claim = async (key, token, leaseMs) => {
    // The assignments run left to right, each seeing the ones before: expires_at comes last.
    const taken = await affected(
      `INSERT INTO \`${t}\` (\`key\`, token, expires_at) VALUES (?, ?, ${later})
ON DUPLICATE KEY UPDATE outcome = IF(${EXPIRED}, NULL, outcome),
  token = IF(${EXPIRED}, ?, token), expires_at = IF(${EXPIRED}, ${later}, expires_at)`,
      [key, token, leaseMs * 1000, token, leaseMs * 1000],
    );
    if (taken > 0) return null;
    const [[row]] = await pool.query(
      `SELECT token, outcome FROM \`${t}\` WHERE \`key\` = ? AND expires_at > ${NOW}`,
      [key],
    );
    // No live row: released or expired since the INSERT; the key may be free, claim again.
    return row ? (row.token ?? row.outcome) : claim(key, token, leaseMs);
  };
  return {
    pool,
    ddl: (text) => pool.query(text),
    claim,
    complete: async (key, token, outcome, ttlMs) =>
      (await affected(
        `UPDATE \`${t}\` SET token = NULL, outcome = ?, expires_at = ${later}
WHERE \`key\` = ? AND token = ?`,
        [outcome, ttlMs * 1000, key, token],
      )) === 1,
    release: async (key, token) =>
      (await affected(`DELETE FROM \`${t}\` WHERE \`key\` = ? AND token = ?`, [key, token])) === 1,
  };
}

/**
 * The floor on `store` ('postgres' or 'mysql') at `url`, in `table` (created if missing; the
 * caller drops it). Options as createFloor's: `leaseMs` (default 30 000 ms), `ttlMs` (default a
 * day). Resolves once the table exists; `close()` ends its pool.
 */
async function createSqlFloor(store, url, table, { leaseMs = 30_000, ttlMs = 86_400_000 } = {}) {
  const db = (store === 'postgres' ? postgres : mysql)(url, table);
  await db.ddl(DDL[store](table));
  const floor = {
    token,
    /** Claims `key` for `token`: null when claimed, else the record (a token, or an outcome). */
    claim: (key, token) => db.claim(key, token, leaseMs),
    pending,
    /** Stores `outcome` (a string) if `token` still owns `key`; resolves whether it did. */
    complete: (key, token, outcome) => db.complete(key, token, outcome, ttlMs),
    /** Frees `key` for a retry if `token` still owns it; resolves whether it did. */
    release: (key, token) => db.release(key, token),
    /** floor.js's run(key, fn) on this floor. */
    run: (key, fn) => run(floor, key, fn),
    close: () => db.pool.end(),
  };
  return floor;
}

module.exports = { createSqlFloor, FloorConflict };
