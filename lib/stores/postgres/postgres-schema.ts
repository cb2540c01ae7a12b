/**
 * The PostgreSQL store's DDL: the migrations in `sql/postgres/` (their one home) for a table of
 * any name, as ensureSchema runs them and as the exported functions return them.
 */
import { createHash } from 'node:crypto';
import { schemaOf } from '../sql/options';
import { MIGRATIONS, migrationStatements } from '../sql/sql-migrations';
import { DEFAULT_TABLE, quote } from './postgres-statements';
import { postgresStepsTableName } from './postgres-steps';

/** PostgreSQL's NAMEDATALEN - 1: the longest name it keeps whole, in bytes. */
const MAX_NAME_BYTES = 63;

/**
 * An index's name: the table's (without its schema) and `suffix`, or, when that is longer than
 * PostgreSQL keeps (it would cut the name short, to the table's own name when that is 63 long,
 * and `CREATE INDEX IF NOT EXISTS` would then skip it), the table's name cut to fit with a hash
 * of it: still unique to the table.
 */
export function indexName(table: string, suffix: string): string {
  const name = `${table}${suffix}`;
  if (Buffer.byteLength(name) <= MAX_NAME_BYTES) return name;
  const hash = createHash('sha256').update(table).digest('hex').slice(0, 8);
  return `${table.slice(0, MAX_NAME_BYTES - suffix.length - 9)}_${hash}${suffix}`;
}

/** The expiry index's name: `<table>_expires_at_idx`, cut and hashed to fit (see indexName). */
export function expiryIndexName(table: string): string {
  return indexName(table, '_expires_at_idx');
}

/** The statements of the migration `file` for the records' table `table`. */
export function postgresMigration(file: string, table: string): string[] {
  return migrationStatements('postgres', file, ({ steps, index }) => {
    const named = steps ? postgresStepsTableName(table) : table;
    return quote(index ? indexName(named.split('.').pop()!, index) : named);
  });
}

/**
 * What runs before the DDL, in its implicit transaction: the advisory lock that keeps app
 * instances booting together from racing on `CREATE TABLE IF NOT EXISTS` (which can fail with a
 * duplicate key on pg_type when two run at once), and the schema of a qualified table.
 */
export function postgresPreamble(table: string): string[] {
  const schema = schemaOf(table);
  return [
    `SELECT pg_advisory_xact_lock(hashtext('nestjs-idempotency ${table}'))`,
    ...(schema ? [`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`] : []),
  ];
}

/** Statements as one script (one implicit transaction when sent in one query). */
export const script = (statements: string[]) => `${statements.join(';\n')};`;

/**
 * The DDL of `sql/postgres/001_idempotency_records.sql` for `table`, after the advisory lock and
 * the schema (see postgresPreamble): one script a migration can run as it is.
 */
export function postgresSchemaSql(table = DEFAULT_TABLE): string {
  return script([...postgresPreamble(table), ...postgresMigration(MIGRATIONS.records, table)]);
}

/**
 * The DDL of `sql/postgres/002_idempotency_steps.sql` for the records' table `table` (run after
 * `postgresSchemaSql`, which creates the schema and takes the lock).
 */
export function postgresStepsSchemaSql(table = DEFAULT_TABLE): string {
  return script(postgresMigration(MIGRATIONS.steps, table));
}

/**
 * The DDL of `sql/postgres/003_idempotency_listing.sql` for the records' table `table`: the
 * columns and indexes listing reads (run after `postgresSchemaSql`).
 */
export function postgresListingSchemaSql(table = DEFAULT_TABLE): string {
  return script(postgresMigration(MIGRATIONS.listing, table));
}
