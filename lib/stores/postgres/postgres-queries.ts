import { createHash } from 'node:crypto';
import type { Pool, QueryResult, QueryResultRow } from 'pg';
import type { RecordedStep } from '../idempotency.store';
import { PostgresSchema } from './postgres-schema';
import { statements } from './postgres-statements';
import { stepStatements } from './postgres-steps';
import { databaseErrorCode } from '../sql/errors';
import { queryInTransaction } from '../sql/transaction';

/** Every statement of the store, for one table. */
export type AllStatements = ReturnType<typeof statements> & ReturnType<typeof stepStatements>;
export type StatementName = keyof AllStatements;

/** The statements of resumable runs and operators that touch the steps table. */
const STEP_STATEMENTS = new Set<StatementName>(Object.keys(stepStatements('t')) as StatementName[]);

/** Table or schema missing: a missing migration, not an outage. */
const MISSING = new Set(['42P01', '3F000']);

/**
 * How the PostgreSQL store sends its statements: each as a prepared statement of its connection
 * (named by a hash of its text, so that each connection parses and plans it once), after the
 * tables exist (ensureSchema), with a missing table reported as the migration to apply.
 */
export class PostgresQueries {
  readonly sql: AllStatements;
  private readonly names: Record<StatementName, string>;
  /** Whether a statement on the steps table went through (so the table exists, and is used). */
  private stepsUsed = false;

  constructor(
    private readonly pool: Pool,
    table: string,
    private readonly schema: PostgresSchema,
    private readonly ensureSchema: boolean,
  ) {
    this.sql = { ...statements(table), ...stepStatements(table) };
    this.names = Object.fromEntries(
      Object.entries(this.sql).map(([name, text]) => [
        name,
        `idempotency_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`,
      ]),
    ) as Record<StatementName, string>;
  }

  /** Runs a statement of the store as a prepared statement of its connection. */
  async run(name: StatementName, values: unknown[]): Promise<QueryResult> {
    if (this.ensureSchema) await this.schema.ensure();
    try {
      const result = await this.pool.query({
        name: this.names[name],
        text: this.sql[name],
        values,
      });
      if (STEP_STATEMENTS.has(name)) this.stepsUsed = true;
      return result;
    } catch (error) {
      throw await this.explained(name, error);
    }
  }

  /** {@link run}'s rows. */
  async rows<T extends QueryResultRow>(name: StatementName, values: unknown[]): Promise<T[]> {
    return (await this.run(name, values)).rows as T[];
  }

  /**
   * Runs a statement of the store through `tx`, the app's transaction handle (see
   * queryInTransaction); `operation` names the store method in messages.
   */
  async inTransaction(
    tx: unknown,
    name: StatementName,
    values: unknown[],
    operation: string,
  ): Promise<unknown> {
    try {
      const result = await queryInTransaction(tx, this.sql[name], values, '$n', operation);
      if (STEP_STATEMENTS.has(name)) this.stepsUsed = true;
      return result;
    } catch (error) {
      // The completion's errors stay as they always were; only steps' are explained.
      throw STEP_STATEMENTS.has(name) ? await this.explained(name, error) : error;
    }
  }

  /** Whether the steps table exists (see PostgresSchema.hasSteps). */
  hasSteps(): Promise<boolean> {
    return this.schema.hasSteps();
  }

  /** The key's live steps (index and name), once the steps table exists. */
  async stepNames(key: string): Promise<RecordedStep[]> {
    if (!(await this.hasSteps())) return [];
    const rows = await this.rows<{ idx: number; name: string }>('inspectSteps', [key]);
    return rows.map(({ idx, name }) => ({ index: idx, name }));
  }

  /**
   * The sweeper's batches: the records', then the steps', once this store has used steps (a
   * statement on the steps table went through): a store of an app without resumable runs sends
   * its sweeps alone, as before steps, and needs no steps table. Steps another instance left are
   * swept by those that serve resumable runs. Each resolves the rows it deleted.
   */
  sweepBatches(): ((batch: number) => Promise<number>)[] {
    return [
      async (batch) => (await this.run('sweep', [batch])).rowCount ?? 0,
      async (batch) =>
        this.stepsUsed ? ((await this.run('sweepSteps', [batch])).rowCount ?? 0) : 0,
    ];
  }

  /** `error`, or for a missing table or schema the message that names what to apply. */
  private async explained(name: StatementName, error: unknown): Promise<unknown> {
    const code = databaseErrorCode(error);
    if (code === undefined || !MISSING.has(code)) return error;
    const message = STEP_STATEMENTS.has(name)
      ? await this.schema.missingForSteps(code)
      : this.schema.missing(code === '42P01');
    return new Error(message, { cause: error });
  }
}
