import type { Logger } from '@nestjs/common';
import type { Pool as PromisePool } from 'mysql2/promise';
import { mysqlSchemaSql, quoteMysql } from './mysql-statements';
import { describeError, within } from '../sql/errors';
import { schemaOf } from '../sql/options';
import { schemaProblem } from '../sql/schema-check';

/**
 * The MySQL store's table: whether it (and its database) exist, what to say when not, and its
 * creation with ensureSchema.
 */
export class MysqlSchema {
  /** The table, once created or found (ensureSchema). */
  private created?: Promise<void>;

  constructor(
    private readonly pool: PromisePool,
    private readonly table: string,
    private readonly logger: Logger,
  ) {}

  /** Without ensureSchema: logs what is missing (table, database) and the fix. */
  async check(): Promise<void> {
    const found = await this.find();
    if (!found.table) this.logger.error(this.missing(found.schema));
  }

  /** Whether the table, and the database it belongs in, exist. */
  private async find(): Promise<{ schema: boolean; table: boolean }> {
    const database = schemaOf(this.table);
    const [rows] = await this.pool.query(
      `SELECT (SELECT COUNT(*) FROM information_schema.schemata
         WHERE schema_name = COALESCE(?, DATABASE())) AS has_schema,
        (SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?) AS has_table`,
      [database ?? null, database ?? null, this.table.split('.').pop()],
    );
    const [row] = rows as { has_schema: number | string; has_table: number | string }[];
    return { schema: Number(row.has_schema) > 0, table: Number(row.has_table) > 0 };
  }

  /**
   * Resolves true once the database answers (with `ensure`: once the table exists), false after
   * `timeoutMs` or on an error, which it logs: the module warns and boots anyway. A missing table
   * or database is logged as such, with the migration to apply, and resolves true: the database
   * is there, and first use reports the same.
   */
  async whenReady(ensure: boolean, timeoutMs: number): Promise<boolean> {
    const check = ensure ? this.ensure() : this.check();
    const answered = await within(
      check.then(
        () => true,
        (error: unknown) => {
          this.logger.warn(`MySQL is not ready: ${describeError(error)}`);
          return false;
        },
      ),
      timeoutMs,
    );
    return answered === true;
  }

  missing(schemaExists: boolean): string {
    return schemaProblem({
      database: 'MySQL',
      table: this.table,
      schemaExists,
      schemaWord: 'database',
      migration: 'sql/mysql/001_idempotency_records.sql',
      option: 'mysql',
    });
  }

  /**
   * Creates the database (qualified name) and table once; a failure is retried on next call.
   * Looks first: CREATE TABLE IF NOT EXISTS takes a metadata lock on the table, which waits for
   * every open transaction that touched it (an app's, or a dead process's not yet rolled back).
   */
  ensure(): Promise<void> {
    return (this.created ??= (async () => {
      if ((await this.find()).table) return;
      const database = schemaOf(this.table);
      if (database) {
        await this.pool
          .query(`CREATE DATABASE IF NOT EXISTS ${quoteMysql(database)}`)
          .catch((error: unknown) => {
            throw new Error(
              `MysqlIdempotencyStore: ensureSchema could not create the database ${database} ` +
                `of the table ${this.table}: ${describeError(error)}. Create it, or grant CREATE.`,
              { cause: error },
            );
          });
      }
      await this.pool.query(mysqlSchemaSql(this.table));
    })().catch((error: unknown) => {
      this.created = undefined;
      throw error;
    }));
  }
}
