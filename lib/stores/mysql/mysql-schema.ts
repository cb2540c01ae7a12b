import type { Logger } from '@nestjs/common';
import type { Pool as PromisePool } from 'mysql2/promise';
import { mysqlSchemaSql, quoteMysql } from './mysql-statements';
import { mysqlStepsSchemaSql, mysqlStepsTableName } from './mysql-steps';
import { describeError, within } from '../sql/errors';
import { schemaOf } from '../sql/options';
import { schemaProblem } from '../sql/schema-check';

/**
 * The MySQL store's tables (the records', and the steps' beside it): whether they (and their
 * database) exist, what to say when not, and their creation with ensureSchema.
 */
export class MysqlSchema {
  /** The tables, once created or found (ensureSchema). */
  private created?: Promise<void>;
  /**
   * Whether the steps table is known to exist (created, or seen). Until then it is looked up
   * where its absence is no error: an app that has no resumable runs need not apply its migration.
   */
  private stepsFound = false;

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

  /** Whether the records' table, the steps table and the database they belong in exist. */
  private async find(): Promise<{ schema: boolean; table: boolean; steps: boolean }> {
    const database = schemaOf(this.table) ?? null;
    const [rows] = await this.pool.query(
      `SELECT (SELECT COUNT(*) FROM information_schema.schemata
         WHERE schema_name = COALESCE(?, DATABASE())) AS has_schema,
        (SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?) AS has_table,
        (SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?) AS has_steps`,
      [database, database, lastPart(this.table), database, lastPart(this.steps)],
    );
    const [row] = rows as Record<'has_schema' | 'has_table' | 'has_steps', number | string>[];
    const steps = Number(row.has_steps) > 0;
    if (steps) this.stepsFound = true;
    return { schema: Number(row.has_schema) > 0, table: Number(row.has_table) > 0, steps };
  }

  /** The steps table. */
  private get steps(): string {
    return mysqlStepsTableName(this.table);
  }

  /** Whether the steps table exists (looked up until it does; see stepsFound). */
  async hasSteps(): Promise<boolean> {
    return this.stepsFound || (await this.find()).steps;
  }

  /**
   * What to say when a statement of a resumable run found a table or database missing (`code`
   * ER_NO_SUCH_TABLE or ER_BAD_DB_ERROR): the steps table and its migration when that is the
   * one missing.
   */
  async missingForSteps(code: string): Promise<string> {
    const found = await this.find().catch(() => undefined);
    if (code !== 'ER_NO_SUCH_TABLE' || !found || !found.table || found.steps) {
      return this.missing(code !== 'ER_BAD_DB_ERROR');
    }
    return schemaProblem({
      database: 'MySQL',
      table: this.steps,
      schemaExists: true,
      schemaWord: 'database',
      migration: 'sql/mysql/002_idempotency_steps.sql',
      option: 'mysql',
      holds: 'steps',
    });
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
   * Creates the database (qualified name) and tables once; a failure is retried on next call.
   * Looks first, and creates only what is missing: CREATE TABLE IF NOT EXISTS takes a metadata
   * lock on the table, which waits for every open transaction that touched it (an app's, or a
   * dead process's not yet rolled back).
   */
  ensure(): Promise<void> {
    return (this.created ??= (async () => {
      const found = await this.find();
      if (found.table) {
        if (!found.steps) await this.pool.query(mysqlStepsSchemaSql(this.table));
        this.stepsFound = true;
        return;
      }
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
      await this.pool.query(mysqlStepsSchemaSql(this.table));
      this.stepsFound = true;
    })().catch((error: unknown) => {
      this.created = undefined;
      throw error;
    }));
  }
}

/** The table's name without its database. */
function lastPart(table: string): string {
  return table.split('.').pop()!;
}
