import type { Pool as PromisePool } from 'mysql2/promise';
import type { RecordedStep } from '../idempotency.store';
import { MysqlSchema } from './mysql-schema';
import { mysqlStatements } from './mysql-statements';
import { mysqlStepStatements } from './mysql-steps';
import { databaseErrorCode } from '../sql/errors';
import { queryInTransaction } from '../sql/transaction';

/** Every statement of the store, for one table. */
export type AllMysqlStatements = ReturnType<typeof mysqlStatements> &
  ReturnType<typeof mysqlStepStatements>;
/** The statements that are text (the waiters' poll is built per number of keys). */
export type MysqlStatementName = Exclude<keyof AllMysqlStatements, 'pending'>;

/** The statements of resumable runs and operators that touch the steps table. */
const STEP_STATEMENTS = new Set<string>(Object.keys(mysqlStepStatements('t')));

/** Most keys one poll statement checks. */
const POLL_CHUNK = 500;

/** An OK packet, as much of it as the store reads. */
export interface OkPacket {
  affectedRows: number;
  insertId: number;
}

/**
 * How the MySQL store sends its statements: after the tables exist (ensureSchema), with a
 * missing table or database reported as the migration to apply.
 */
export class MysqlQueries {
  readonly sql: AllMysqlStatements;
  /** Whether a statement on the steps table went through (so the table exists, and is used). */
  private stepsUsed = false;

  constructor(
    private readonly pool: PromisePool,
    table: string,
    private readonly schema: MysqlSchema,
    private readonly ensureSchema: boolean,
  ) {
    this.sql = { ...mysqlStatements(table), ...mysqlStepStatements(table) };
  }

  /** Runs a write statement of the store; resolves its OK packet. */
  async write(name: MysqlStatementName, values: unknown[]): Promise<OkPacket> {
    const [result] = await this.run(name, values);
    return result as OkPacket;
  }

  /** Runs a read statement of the store; resolves its rows. */
  async read<T>(name: MysqlStatementName, values: unknown[]): Promise<T[]> {
    const [rows] = await this.run(name, values);
    return rows as T[];
  }

  /**
   * Runs a statement of the store through `tx`, the app's transaction handle (see
   * queryInTransaction); `operation` names the store method in messages.
   */
  async inTransaction(
    tx: unknown,
    name: MysqlStatementName,
    values: unknown[],
    operation: string,
  ): Promise<unknown> {
    try {
      const result = await queryInTransaction(tx, this.sql[name], values, '?', operation);
      if (STEP_STATEMENTS.has(name)) this.stepsUsed = true;
      return result;
    } catch (error) {
      // The completion's errors stay as they always were; only steps' are explained.
      throw STEP_STATEMENTS.has(name) ? await this.explained(name, error) : error;
    }
  }

  /** Whether the steps table exists (see MysqlSchema.hasSteps). */
  hasSteps(): Promise<boolean> {
    return this.schema.hasSteps();
  }

  /** The key's live steps (index and name), once the steps table exists. */
  async stepNames(key: string): Promise<RecordedStep[]> {
    if (!(await this.hasSteps())) return [];
    const rows = await this.read<{ idx: number; name: string }>('inspectSteps', [key]);
    return rows.map(({ idx, name }) => ({ index: Number(idx), name }));
  }

  /** Deletes the key's live steps, once the steps table exists. @returns how many. */
  async deleteSteps(key: string): Promise<number> {
    if (!(await this.hasSteps())) return 0;
    return (await this.write('deleteSteps', [key])).affectedRows;
  }

  /**
   * The sweeper's batches: the records', then the steps', once this store has used steps (a
   * statement on the steps table went through): a store of an app without resumable runs sends
   * its sweeps alone, as before steps, and needs no steps table. Steps another instance left are
   * swept by those that serve resumable runs. Each resolves the rows it deleted.
   */
  sweepBatches(): ((batch: number) => Promise<number>)[] {
    return [
      async (batch) => (await this.write('sweep', [batch])).affectedRows,
      async (batch) =>
        this.stepsUsed ? (await this.write('sweepSteps', [batch])).affectedRows : 0,
    ];
  }

  /** Of `keys`, those whose record is still pending (the waiters' poll), in chunks. */
  async pending(keys: string[]): Promise<Set<string>> {
    const pending = new Set<string>();
    for (let i = 0; i < keys.length; i += POLL_CHUNK) {
      const chunk = keys.slice(i, i + POLL_CHUNK);
      const [rows] = await this.query('pending', this.sql.pending(chunk.length), chunk);
      for (const row of rows as { key: Buffer | string }[]) pending.add(row.key.toString());
    }
    return pending;
  }

  private run(name: MysqlStatementName, values: unknown[]) {
    return this.query(name, this.sql[name], values);
  }

  private async query(name: string, sql: string, values: unknown[]) {
    if (this.ensureSchema) await this.schema.ensure();
    try {
      const result = await this.pool.query(sql, values);
      if (STEP_STATEMENTS.has(name)) this.stepsUsed = true;
      return result;
    } catch (error) {
      throw await this.explained(name, error);
    }
  }

  /** `error`, or for a missing table or database the message that names what to apply. */
  private async explained(name: string, error: unknown): Promise<unknown> {
    // ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR: a missing migration, not an outage.
    const code = databaseErrorCode(error);
    if (code !== 'ER_NO_SUCH_TABLE' && code !== 'ER_BAD_DB_ERROR') return error;
    const message = STEP_STATEMENTS.has(name)
      ? await this.schema.missingForSteps(code)
      : this.schema.missing(code !== 'ER_BAD_DB_ERROR');
    return new Error(message, { cause: error });
  }
}
