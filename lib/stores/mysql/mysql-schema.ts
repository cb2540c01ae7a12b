/**
 * The MySQL/MariaDB store's DDL: the migrations in `sql/mysql/` (their one home) for a table of
 * any name, as ensureSchema runs them and as the exported functions return them.
 */
import { MIGRATIONS, migrationStatements } from '../sql/sql-migrations';
import { DEFAULT_MYSQL_TABLE, quoteMysql } from './mysql-statements';
import { mysqlStepsTableName } from './mysql-steps';

/**
 * The statements of the migration `file` for the records' table `table`, one by one (a pool
 * runs one statement per query unless it enables multipleStatements). Its indexes are named
 * within their table: only the tables are renamed.
 */
export function mysqlMigration(file: string, table: string): string[] {
  return migrationStatements('mysql', file, ({ steps }) =>
    quoteMysql(steps ? mysqlStepsTableName(table) : table),
  );
}

/** The DDL of `sql/mysql/001_idempotency_records.sql` for `table` (one statement, idempotent). */
export function mysqlSchemaSql(table = DEFAULT_MYSQL_TABLE): string {
  return mysqlMigration(MIGRATIONS.records, table).join(';\n');
}

/** The DDL of `sql/mysql/002_idempotency_steps.sql` for the records' table `table` (idempotent). */
export function mysqlStepsSchemaSql(table = DEFAULT_MYSQL_TABLE): string {
  return mysqlMigration(MIGRATIONS.steps, table).join(';\n');
}

/**
 * The DDL of `sql/mysql/003_idempotency_listing.sql` for the records' table `table`: the columns
 * and index listing reads (one ALTER TABLE, to run once, after `mysqlSchemaSql`).
 */
export function mysqlListingSchemaSql(table = DEFAULT_MYSQL_TABLE): string {
  return mysqlMigration(MIGRATIONS.listing, table).join(';\n');
}
