import type { Logger } from '@nestjs/common';
import { describeError, within } from './errors';
import { MIGRATIONS } from './sql-migrations';
import type { FoundTables, SqlDialect } from './sql-dialect';
import { schemaProblem } from './schema-check';

/**
 * A SQL store's tables (the records', and the steps' beside it): whether they (and their schema)
 * exist, what to say when not, and their creation with ensureSchema.
 */
export class SqlSchema {
  /** The tables, once created or found (ensureSchema). */
  private created?: Promise<void>;
  /**
   * Whether the steps table is known to exist (created, or seen). Until then it is looked up
   * where its absence is no error: an app that has no resumable runs need not apply its migration.
   */
  private stepsFound = false;

  constructor(
    private readonly dialect: SqlDialect,
    private readonly logger: Logger,
  ) {}

  /**
   * Creates what is missing of the tables once (ensureSchema); a failure is retried on the next
   * call. Looks first, and creates only what is missing: DDL on a table that exists still takes
   * locks on it (MySQL's CREATE TABLE IF NOT EXISTS a metadata lock, which waits for every open
   * transaction that touched the table, an app's or a dead process's not yet rolled back).
   */
  ensure(): Promise<void> {
    return (this.created ??= (async () => {
      const found = await this.find();
      if (!found.table || !found.steps || !found.listing) await this.dialect.create(found);
      this.stepsFound = true;
    })().catch((error: unknown) => {
      this.created = undefined;
      throw error;
    }));
  }

  /**
   * Without ensureSchema: logs what is missing (table, schema) and the fix. The database
   * answered, so the module does not report an outage.
   */
  async check(): Promise<void> {
    const found = await this.find();
    if (!found.table) this.logger.error(this.missing(found.schema));
    else if (!found.listing) this.logger.error(this.missingColumns());
  }

  /**
   * Resolves true once the database answers (with `ensure`: once the tables exist), false after
   * `timeoutMs` or on an error, which it logs: the module warns and boots anyway. A missing table
   * or schema is logged as such, with the migration to apply, and resolves true: the database is
   * there, and first use reports the same.
   */
  async whenReady(ensure: boolean, timeoutMs: number): Promise<boolean> {
    const check = ensure ? this.ensure() : this.check();
    const answered = await within(
      check.then(
        () => true,
        (error: unknown) => {
          this.logger.warn(`${this.dialect.name} is not ready: ${describeError(error)}`);
          return false;
        },
      ),
      timeoutMs,
    );
    return answered === true;
  }

  /** Whether the steps table exists (looked up until it does; see stepsFound). */
  async hasSteps(): Promise<boolean> {
    return this.stepsFound || (await this.find()).steps;
  }

  /** What to say when the records' table, or its schema (`schemaExists` false), is missing. */
  missing(schemaExists: boolean): string {
    return this.problem(this.dialect.table, schemaExists, MIGRATIONS.records);
  }

  /** What to say when the records' table lacks the columns of migration 003. */
  missingColumns(): string {
    const { name, folder, table } = this.dialect;
    return (
      `${name}: the table "${table}" lacks the columns that list records by state (not an ` +
      `outage: a migration to apply). Apply sql/${folder}/${MIGRATIONS.listing} from the ` +
      `nestjs-idempotency package with your migrations, or set ${folder}: { ..., ` +
      'ensureSchema: true } to add them at boot. Idempotent requests answer 503 until it is applied.'
    );
  }

  /**
   * What to say when a statement of a resumable run found a table or schema missing: the steps
   * table and its migration when that is the one missing.
   */
  async missingForSteps(missing: 'table' | 'schema'): Promise<string> {
    const found = await this.find().catch(() => undefined);
    if (missing !== 'table' || !found?.table || found.steps) {
      return this.missing(missing === 'table');
    }
    return this.problem(this.dialect.stepsTable, true, MIGRATIONS.steps, 'steps');
  }

  private async find(): Promise<FoundTables> {
    const found = await this.dialect.find();
    if (found.steps) this.stepsFound = true;
    return found;
  }

  private problem(table: string, schemaExists: boolean, file: string, holds?: 'steps'): string {
    const { name, folder, schemaWord } = this.dialect;
    const migration = `sql/${folder}/${file}`;
    return schemaProblem({
      database: name,
      table,
      schemaExists,
      schemaWord,
      migration,
      option: folder,
      holds,
    });
  }
}
