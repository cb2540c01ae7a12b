import type { Pool as PromisePool } from 'mysql2/promise';
import type { ClaimRequest, ClaimResult } from '../idempotency.store';
import { databaseErrorCode, describeError, within } from '../sql/errors';
import { schemaOf } from '../sql/options';
import type {
  ClaimParams,
  FoundTables,
  KeyParams,
  Missing,
  SqlContext,
  SqlDialect,
  SqlNotifier,
  SqlResult,
  SqlStatement,
} from '../sql/sql-dialect';
import { MIGRATIONS } from '../sql/sql-migrations';
import { affectedRows } from '../sql/transaction';
import { mysqlListing } from './mysql-listing';
import { MysqlPoller } from './mysql-poller';
import { heldOutcome, inspected, type InspectRow, type LookupRow } from './mysql-rows';
import { mysqlMigration } from './mysql-schema';
import { mysqlStatements, pendingSql, quoteMysql } from './mysql-statements';
import {
  foreign,
  mysqlStepStatements,
  mysqlStepsTableName,
  type StepRow,
  storedSteps,
} from './mysql-steps';

/** Every statement of the store, for one table. */
type MysqlStatements = ReturnType<typeof mysqlStatements> & ReturnType<typeof mysqlStepStatements>;

/** How long close() waits for an owned pool to end, in ms. */
const CLOSE_TIMEOUT_MS = 2_000;
/** Most keys one poll statement checks. */
const POLL_CHUNK = 500;
/** Table, database or column missing: a missing migration, not an outage. */
const MISSING: Record<string, Missing> = {
  ER_NO_SUCH_TABLE: 'table',
  ER_BAD_DB_ERROR: 'schema',
  ER_BAD_FIELD_ERROR: 'columns',
};
/** What a second ALTER of migration 003 meets when another instance applied it first. */
const APPLIED = new Set(['ER_DUP_FIELDNAME', 'ER_DUP_KEYNAME']);

/** An OK packet, as much of it as the store reads. */
interface OkPacket {
  affectedRows: number;
  insertId: number;
}

/**
 * MySQL/MariaDB for the SQL store core, on a mysql2 pool (promise API). Every operation is one
 * statement except a claim that finds the key held (a second statement reads the record:
 * MySQL's INSERT returns no row), a resumable claim that takes the key (a second reads its
 * steps) and an operator's delete of an expired record.
 *
 * MySQL has no LISTEN/NOTIFY: a completion, release or deletion by this process wakes its waiters
 * at once; for other processes' one statement per process polls the watched keys, backing off
 * from 25 ms to `waitPollMaxMs` (see docs/mysql.md).
 */
export class MysqlDialect implements SqlDialect {
  readonly name = 'MySQL';
  readonly folder = 'mysql';
  readonly schemaWord = 'database';
  readonly placeholders = '?';
  readonly stepsTable: string;
  readonly sql: MysqlStatements;
  readonly listing = mysqlListing;

  constructor(
    /** The pool, through mysql2's promise API. */
    readonly pool: PromisePool,
    readonly table: string,
    private readonly options: { ownsPool: boolean; waitPollMaxMs: number },
  ) {
    this.stepsTable = mysqlStepsTableName(table);
    this.sql = { ...mysqlStatements(table), ...mysqlStepStatements(table) };
  }

  async exec(statement: Pick<SqlStatement<never>, 'text'>, values: unknown[]): Promise<SqlResult> {
    const [result] = await this.pool.query(statement.text, values);
    if (Array.isArray(result)) return { rows: result, changed: 0 };
    const ok = result as unknown as OkPacket;
    return { rows: [], changed: ok.affectedRows, insertId: Number(ok.insertId) };
  }

  changedIn(raw: unknown): number {
    return affectedRows(raw);
  }

  missing(code: string): Missing | undefined {
    return MISSING[code];
  }

  async find(): Promise<FoundTables> {
    const database = schemaOf(this.table) ?? null;
    const [rows] = await this.pool.query(
      `SELECT (SELECT COUNT(*) FROM information_schema.schemata
         WHERE schema_name = COALESCE(?, DATABASE())) AS has_schema,
        (SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?) AS has_table,
        (SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?) AS has_steps,
        (SELECT COUNT(*) FROM information_schema.columns
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?
           AND column_name = 'label') AS has_listing`,
      [
        database,
        database,
        lastPart(this.table),
        database,
        lastPart(this.stepsTable),
        database,
        lastPart(this.table),
      ],
    );
    const [row] = rows as Record<string, number | string>[];
    return {
      schema: Number(row.has_schema) > 0,
      table: Number(row.has_table) > 0,
      steps: Number(row.has_steps) > 0,
      listing: Number(row.has_listing) > 0,
    };
  }

  /**
   * What `found` lacks: the database of a qualified name, the records' table, the steps table,
   * the listing's columns and index. Migration 003 is an ALTER that cannot run twice: one that
   * finds it applied by another instance booting too is done.
   */
  async create(found: FoundTables): Promise<void> {
    const database = schemaOf(this.table);
    if (database && !found.table) {
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
    const ddl = [
      ...(found.table ? [] : mysqlMigration(MIGRATIONS.records, this.table)),
      ...(found.steps ? [] : mysqlMigration(MIGRATIONS.steps, this.table)),
    ];
    for (const statement of ddl) await this.pool.query(statement);
    if (found.listing) return;
    for (const statement of mysqlMigration(MIGRATIONS.listing, this.table)) {
      await this.pool.query(statement).catch((error: unknown) => {
        if (!APPLIED.has(databaseErrorCode(error) ?? '')) throw error;
      });
    }
  }

  /**
   * One statement when the key is free or expired. When it is held, a second statement reads the
   * record; if that finds none (released or expired in between), the claim runs again. A
   * `resumable` claim that takes the key reads its steps with a second statement (see resumed).
   */
  async claim(
    context: SqlContext,
    key: string,
    request: ClaimRequest,
  ): Promise<ClaimResult | undefined> {
    const { queries } = context;
    const params = { key, ...request };
    const ok = await queries.run<ClaimParams>(this.sql.claim, params);
    if (ok.insertId !== 1) {
      return request.resumable ? this.resumed(context, key, request) : { status: 'claimed' };
    }
    const [row] = await queries.rows<LookupRow, ClaimParams>(this.sql.lookup, params);
    if (row && Number(row.own) === 1) {
      return request.resumable ? this.resumed(context, key, request) : { status: 'claimed' };
    }
    return row && heldOutcome(row);
  }

  /**
   * Two statements when the record expired: its row goes too, so its owner cannot complete it.
   * Then the key's steps (once the steps table exists).
   */
  async delete({ queries }: SqlContext, key: string): Promise<boolean> {
    const live = (await queries.changed<KeyParams>(this.sql.deleteLive, { key })) === 1;
    if (!live) await queries.run<KeyParams>(this.sql.deleteAny, { key });
    const steps = (await queries.hasSteps())
      ? await queries.changed<KeyParams>(this.sql.deleteSteps, { key })
      : 0;
    return live || steps > 0;
  }

  inspected(row: unknown) {
    return inspected(row as InspectRow | undefined);
  }

  /**
   * This process's own completions, releases and deletions wake their waiters at once; the
   * poll finds the others' (and a completion in the app's transaction, once it commits).
   */
  notifier({ queries, watchers, logger }: SqlContext): SqlNotifier {
    const pending = async (keys: string[]) => {
      const found = new Set<string>();
      for (let i = 0; i < keys.length; i += POLL_CHUNK) {
        const chunk = keys.slice(i, i + POLL_CHUNK);
        const text = pendingSql(this.table, chunk.length);
        const rows = await queries.rows<{ key: Buffer | string }, string[]>(
          { name: 'pending', text, bind: () => chunk },
          chunk,
        );
        for (const row of rows) found.add(row.key.toString());
      }
      return found;
    };
    const poller = new MysqlPoller(watchers, pending, this.options.waitPollMaxMs, logger);
    return {
      changed: (key) => watchers.wake(key),
      committing: () => poller.soon(),
      watching: async () => poller.soon(),
      close: () => poller.stop(),
    };
  }

  /** Ends the pool if the store owns it, bounded. */
  async end(): Promise<void> {
    if (this.options.ownsPool)
      await within(
        this.pool.end().catch(() => {}),
        CLOSE_TIMEOUT_MS,
      );
  }

  /**
   * The claim of a resumable run that took the key: the steps recorded under it, read once the
   * claim has committed (MySQL's INSERT returns no rows). Steps of another payload: the claim
   * is released, and the key is key_reused. A failure (no steps table) releases it too.
   */
  private async resumed(
    context: SqlContext,
    key: string,
    { token, fingerprint }: ClaimRequest,
  ): Promise<ClaimResult> {
    let rows: StepRow[];
    try {
      rows = await context.queries.rows<StepRow, KeyParams>(this.sql.claimedSteps, { key });
    } catch (error) {
      await context.release(key, token).catch(() => false);
      throw error;
    }
    if (rows.some((row) => foreign(row, fingerprint))) {
      await context.release(key, token);
      return { status: 'key_reused' };
    }
    const steps = storedSteps(rows);
    return steps ? { status: 'claimed', steps } : { status: 'claimed' };
  }
}

/** The table's name without its database. */
function lastPart(table: string): string {
  return table.split('.').pop()!;
}
