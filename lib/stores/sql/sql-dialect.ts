/**
 * What the one SQL store core (sql-store.ts) asks of a database: its statements, how to send them
 * through its driver, how to read its results, its tables, the two operations whose flow differs
 * (a claim, an operator's delete) and how its waiters hear of changes. As Knex and Kysely keep one
 * query builder with a dialect per database: PostgreSQL (postgres/postgres-dialect.ts) and
 * MySQL/MariaDB (mysql/mysql-dialect.ts).
 */
import type { Logger } from '@nestjs/common';
import type { ClaimRequest, ClaimResult, StoredResponse, StoredStep } from '../idempotency.store';
import type { SqlListingDialect } from './sql-listing-sql';
import type { SqlQueries } from './sql-queries';
import type { Placeholders } from './transaction';
import type { Watchers } from './watchers';

/** A statement of the store: its text, and how a call's values bind to its placeholders. */
export interface SqlStatement<P> {
  /** Names it: PostgreSQL's prepared statement (`idempotency_<name>_<hash>`), messages. */
  readonly name: string;
  readonly text: string;
  /**
   * It reads or writes the steps table: it may run once the steps table exists, and its error
   * for a missing table names the steps' migration.
   */
  readonly steps?: boolean;
  /**
   * Built for one call, its values bound already (the listing's): PostgreSQL plans it for them
   * each time, rather than keeping a prepared statement whose generic plan would not know them.
   */
  readonly adHoc?: boolean;
  /** The values, in the order of the text's placeholders (`$n`, or `?` with repeats). */
  bind(params: P): unknown[];
}

/** What a statement's text and binding are, before {@link named} gives it its name. */
export type Unnamed<P> = Omit<SqlStatement<P>, 'name'>;

/** Statements named by their keys. */
export function named<T extends Record<string, Unnamed<never>>>(
  statements: T,
): { [K in keyof T]: T[K] & { name: K & string } } {
  const entries = Object.entries(statements).map(([name, statement]) => [
    name,
    { ...statement, name },
  ]);
  return Object.fromEntries(entries) as { [K in keyof T]: T[K] & { name: K & string } };
}

/** The record's key. */
export interface KeyParams {
  key: string;
}

/** The record's key and the owner token a write is fenced by. */
export interface OwnerParams extends KeyParams {
  token: string;
}

/** A claim's values. */
export type ClaimParams = KeyParams & ClaimRequest;

/** A completion's values: the response, kept `ttlMs`. */
export interface CompleteParams extends OwnerParams {
  response: StoredResponse;
  ttlMs: number;
}

/** A lease renewed to `leaseMs` from now. */
export interface ExtendParams extends OwnerParams {
  leaseMs: number;
}

/** A step recorded under the claim, kept `ttlMs`. */
export interface StepParams extends OwnerParams {
  step: StoredStep;
  ttlMs: number;
}

/** At most `batch` rows. */
export interface BatchParams {
  batch: number;
}

/** The statements every dialect has, which the core runs as they are. */
export interface CoreStatements {
  /** Stores the response; changes 1 row (or more, with the steps it expires) when stored. */
  complete: SqlStatement<CompleteParams>;
  /** `complete`, and the key's steps deleted (or expired) with it. */
  completeClearing: SqlStatement<CompleteParams>;
  /** Ends the claim; changes 1 row when released. */
  release: SqlStatement<OwnerParams>;
  /** Renews the lease; changes 1 row when extended. */
  extend: SqlStatement<ExtendParams>;
  /** Records a step; changes at least 1 row when recorded. */
  recordStep: SqlStatement<StepParams>;
  /** The live record: one row or none ({@link SqlDialect.inspected} reads it). */
  inspect: SqlStatement<KeyParams>;
  /** The key's live steps: `idx` and `name`, in index order. */
  inspectSteps: SqlStatement<KeyParams>;
  /**
   * Deletes up to `batch` expired records, but those listing keeps (a claim that died, for a
   * day); changes the rows it deleted. For a store without a steps table.
   */
  sweep: SqlStatement<BatchParams>;
  /** `sweep` once the steps table exists: it keeps half-done runs too, while their steps live. */
  sweepRuns: SqlStatement<BatchParams>;
  /** `sweep`, for expired steps. */
  sweepSteps: SqlStatement<BatchParams>;
}

/** What the driver answered, as the core reads it. */
export interface SqlResult {
  rows: unknown[];
  /**
   * Rows the statement changed: MySQL's affected rows; on PostgreSQL the column `n` of its row
   * for a statement that counts what its CTEs changed, else the row count.
   */
  changed: number;
  /** MySQL's `insertId` (the claim's LAST_INSERT_ID(1) says the key was held). */
  insertId?: number;
}

/** Which of a store's tables exist. */
export interface FoundTables {
  /** The schema (PostgreSQL) or database (MySQL) the table belongs in. */
  schema: boolean;
  /** The records' table. */
  table: boolean;
  /** The steps table beside it. */
  steps: boolean;
  /** The records' table has the columns listing reads (migration 003). */
  listing: boolean;
}

/** What a database error says is missing: a table, its schema, or columns (a migration). */
export type Missing = 'table' | 'schema' | 'columns';

/** The live record `inspect` found, in ms. */
export interface InspectedRow {
  state: 'p' | 'c';
  meta: string | null;
  bytes: number;
  /** Until the lease or the retention ends. */
  leftMs: number;
  /** Since the completion (0 for a pending record). */
  ageMs: number;
}

/** How waiters hear that a watched record changed. */
export interface SqlNotifier {
  /** This process completed, released or deleted `key`. */
  changed(key: string): void;
  /** A completion written in the app's transaction may commit any moment. */
  committing(): void;
  /** Resolves once changes of the watched keys reach the watchers (a wait started). */
  watching(): Promise<void>;
  close(): void;
}

/** What a dialect's operations work with: the core's parts. */
export interface SqlContext {
  readonly queries: SqlQueries;
  readonly watchers: Watchers;
  readonly logger: Logger;
  /** The store's release (a resumable claim that must give the key back). */
  release(key: string, token: string): Promise<boolean>;
}

/** A database, as the SQL store core sees it. */
export interface SqlDialect {
  /** `'PostgreSQL'` or `'MySQL'`: the store's `displayName`, messages. */
  readonly name: string;
  /** Its migrations' folder in `sql/`, and its module option: `'postgres'` or `'mysql'`. */
  readonly folder: 'postgres' | 'mysql';
  /** What holds tables: `'schema'` (PostgreSQL) or `'database'` (MySQL). */
  readonly schemaWord: string;
  readonly placeholders: Placeholders;
  /** The records' table, as configured. */
  readonly table: string;
  /** The steps table beside it (see steps-table.ts). */
  readonly stepsTable: string;
  readonly sql: CoreStatements;
  /** What the listing statements need of its SQL. */
  readonly listing: SqlListingDialect;
  /** Sends a statement through the pool. */
  exec(
    statement: Pick<SqlStatement<never>, 'name' | 'text'>,
    values: unknown[],
  ): Promise<SqlResult>;
  /** Rows changed, read from what `queryInTransaction` resolved. */
  changedIn(raw: unknown): number;
  /** Whether a database error code says a table, its schema or a column does not exist. */
  missing(code: string): Missing | undefined;
  /** Which of the store's tables exist. */
  find(): Promise<FoundTables>;
  /** Creates what `found` lacks, from the migrations in `sql/<folder>/` (ensureSchema). */
  create(found: FoundTables): Promise<void>;
  /** One claim; undefined when it lost a race with another and must run again. */
  claim(context: SqlContext, key: string, request: ClaimRequest): Promise<ClaimResult | undefined>;
  /** The operator's delete of the record and its steps; whether anything live went. */
  delete(context: SqlContext, key: string): Promise<boolean>;
  /** A row of `inspect`, or undefined for none. */
  inspected(row: unknown): InspectedRow | undefined;
  /** How this store's waiters hear of changes; called once, by the store's constructor. */
  notifier(context: SqlContext): SqlNotifier;
  /** Ends what the store owns (its pool, if it owns it; a LISTEN connection), bounded in time. */
  end(): Promise<void>;
}
