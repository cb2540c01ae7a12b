import type { RecordedStep } from '../idempotency.store';
import { databaseErrorCode } from './errors';
import type { SqlDialect, SqlResult, SqlStatement } from './sql-dialect';
import type { SqlSchema } from './sql-schema';
import { queryInTransaction } from './transaction';

/**
 * How a SQL store sends its statements: after the tables exist (ensureSchema), with a missing
 * table or schema reported as the migration to apply, not as an outage.
 */
export class SqlQueries {
  /** Whether a statement on the steps table went through (so the table exists, and is used). */
  private stepsUsed = false;

  constructor(
    private readonly dialect: SqlDialect,
    private readonly schema: SqlSchema,
    private readonly ensureSchema: boolean,
  ) {}

  /** Runs a statement of the store on its pool. */
  async run<P>(statement: SqlStatement<P>, params: P): Promise<SqlResult> {
    if (this.ensureSchema) await this.schema.ensure();
    try {
      const result = await this.dialect.exec(statement, statement.bind(params));
      if (statement.steps) this.stepsUsed = true;
      return result;
    } catch (error) {
      throw await this.explained(statement, error);
    }
  }

  /** {@link run}'s rows. */
  async rows<T, P>(statement: SqlStatement<P>, params: P): Promise<T[]> {
    return (await this.run(statement, params)).rows as T[];
  }

  /** The rows {@link run} changed. */
  async changed<P>(statement: SqlStatement<P>, params: P): Promise<number> {
    return (await this.run(statement, params)).changed;
  }

  /**
   * Runs a statement of the store through `tx`, the app's transaction handle (see
   * queryInTransaction); `operation` names the store method in messages. @returns the rows it
   * changed.
   */
  async inTransaction<P>(
    tx: unknown,
    statement: SqlStatement<P>,
    params: P,
    operation: string,
  ): Promise<number> {
    const { text } = statement;
    const values = statement.bind(params);
    let raw: unknown;
    try {
      raw = await queryInTransaction(tx, text, values, this.dialect.placeholders, operation);
      if (statement.steps) this.stepsUsed = true;
    } catch (error) {
      // The completion's errors stay as they always were; only steps' are explained.
      throw statement.steps ? await this.explained(statement, error) : error;
    }
    return this.dialect.changedIn(raw);
  }

  /** Whether the steps table exists (see SqlSchema.hasSteps). */
  hasSteps(): Promise<boolean> {
    return this.schema.hasSteps();
  }

  /** The key's live steps (index and name), once the steps table exists. */
  async stepNames(key: string): Promise<RecordedStep[]> {
    if (!(await this.hasSteps())) return [];
    const rows = await this.rows<{ idx: number; name: string }, { key: string }>(
      this.dialect.sql.inspectSteps,
      { key },
    );
    return rows.map(({ idx, name }) => ({ index: Number(idx), name }));
  }

  /**
   * The sweeper's batches: the records', then the steps', once this store has used steps (a
   * statement on the steps table went through): a store of an app without resumable runs sends
   * its sweeps alone, as before steps, and needs no steps table. Steps another instance left are
   * swept by those that serve resumable runs. Each resolves the rows it deleted.
   */
  sweepBatches(): ((batch: number) => Promise<number>)[] {
    const { sweep, sweepRuns, sweepSteps } = this.dialect.sql;
    return [
      // Half-done runs' rows stay while their steps live, whichever instance recorded them.
      async (batch) => this.changed((await this.hasSteps()) ? sweepRuns : sweep, { batch }),
      async (batch) => (this.stepsUsed ? this.changed(sweepSteps, { batch }) : 0),
    ];
  }

  /** `error`, or for a missing table or schema the message that names what to apply. */
  private async explained(statement: { steps?: boolean }, error: unknown): Promise<unknown> {
    const code = databaseErrorCode(error);
    const missing = code === undefined ? undefined : this.dialect.missing(code);
    if (!missing) return error;
    const message =
      missing === 'columns'
        ? this.schema.missingColumns()
        : statement.steps
          ? await this.schema.missingForSteps(missing)
          : this.schema.missing(missing === 'table');
    return new Error(message, { cause: error });
  }
}
