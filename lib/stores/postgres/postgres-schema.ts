import type { Logger } from '@nestjs/common';
import type { Pool } from 'pg';
import { postgresSchemaSql, quote } from './postgres-statements';
import { postgresStepsSchemaSql, postgresStepsTableName } from './postgres-steps';
import { describeError } from '../sql/errors';
import { schemaOf } from '../sql/options';
import { schemaProblem } from '../sql/schema-check';

/**
 * The PostgreSQL store's tables (the records', and the steps' beside it): whether they (and
 * their schema) exist, what to say when not, and their creation with ensureSchema.
 */
export class PostgresSchema {
  /** The tables, once created (ensureSchema). */
  private created?: Promise<void>;
  /**
   * Whether the steps table is known to exist (created, or seen). Until then it is looked up
   * where its absence is no error: an app that has no resumable runs need not apply its migration.
   */
  private stepsFound = false;

  constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly logger: Logger,
  ) {}

  /**
   * Creates the tables and indexes once (ensureSchema), in one implicit transaction under the
   * schema's advisory lock; a failure is retried on the next call.
   */
  ensure(): Promise<void> {
    const ddl = `${postgresSchemaSql(this.table)}\n${postgresStepsSchemaSql(this.table)}`;
    return (this.created ??= this.pool.query(ddl).then(
      () => void (this.stepsFound = true),
      (error: unknown) => {
        this.created = undefined;
        const schema = schemaOf(this.table);
        // 42501 insufficient_privilege: most often CREATE on the database, for the schema.
        if (schema && (error as { code?: string }).code === '42501') {
          throw new Error(
            `PostgresIdempotencyStore: ensureSchema could not create the schema "${schema}" or ` +
              `the table "${this.table}" in it: ${describeError(error)}. Create the schema (or ` +
              'grant CREATE), or apply sql/postgres/001_idempotency_records.sql with your migrations.',
            { cause: error },
          );
        }
        throw error;
      },
    ));
  }

  /**
   * Without ensureSchema: logs what is missing (table, schema) and the fix. The database
   * answered, so the module does not report an outage.
   */
  async check(): Promise<void> {
    const { rows } = await this.pool.query<{ has_table: boolean; has_schema: boolean }>(
      `SELECT to_regclass($1) IS NOT NULL AS has_table,
        EXISTS (SELECT FROM pg_namespace WHERE nspname = COALESCE($2, current_schema())) AS has_schema`,
      [quote(this.table), schemaOf(this.table) ?? null],
    );
    if (!rows[0].has_table) this.logger.error(this.missing(rows[0].has_schema));
  }

  /**
   * Resolves true once the database answers (with `ensure`: once the table exists), false after
   * `timeoutMs` or on an error, which it logs: the module warns and boots anyway.
   */
  async whenReady(ensure: boolean, timeoutMs: number): Promise<boolean> {
    const check = ensure ? this.ensure() : this.check();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([check.then(() => true), timeout]);
    } catch (error) {
      this.logger.warn(`PostgreSQL is not ready: ${describeError(error)}`);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the steps table exists (looked up until it does; see stepsFound). */
  async hasSteps(): Promise<boolean> {
    if (this.stepsFound) return true;
    const { rows } = await this.pool.query<{ found: boolean }>(
      'SELECT to_regclass($1) IS NOT NULL AS found',
      [quote(postgresStepsTableName(this.table))],
    );
    return (this.stepsFound = rows[0].found);
  }

  /**
   * What to say when a statement of a resumable run found a table or schema missing (`code`
   * 42P01 or 3F000): the steps table and its migration when that is the one missing.
   */
  async missingForSteps(code: string): Promise<string> {
    const stepsMissing = code === '42P01' && !(await this.hasSteps().catch(() => true));
    if (!stepsMissing) return this.missing(code === '42P01');
    return schemaProblem({
      database: 'PostgreSQL',
      table: postgresStepsTableName(this.table),
      schemaExists: true,
      schemaWord: 'schema',
      migration: 'sql/postgres/002_idempotency_steps.sql',
      option: 'postgres',
      holds: 'steps',
    });
  }

  missing(schemaExists: boolean): string {
    return schemaProblem({
      database: 'PostgreSQL',
      table: this.table,
      schemaExists,
      schemaWord: 'schema',
      migration: 'sql/postgres/001_idempotency_records.sql',
      option: 'postgres',
    });
  }
}
