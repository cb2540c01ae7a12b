/**
 * The one place that knows the transaction handles an app's `TransactionHost`
 * (`@nestjs-cls/transactional`) exposes as `tx`, and how to run a store's statement through each:
 * a TypeORM EntityManager or QueryRunner, a node-postgres client, a mysql2 connection, a Knex
 * transaction, a Prisma interactive-transaction client, a Kysely transaction, a Drizzle
 * transaction. Both SQL stores' `completeInTransaction` call {@link queryInTransaction}, then read
 * the result with {@link resultRows} (PostgreSQL) or {@link affectedRows} (MySQL), so whoever
 * calls a store passes `txHost.tx` as it is.
 */
import { loadPeer } from '../../utils/load-optional';
import { describeValue } from './errors';

/** How a statement marks its parameters: PostgreSQL's `$n` or MySQL's `?`. */
export type Placeholders = '$n' | '?';

/** The part of a Kysely `Transaction` (or `ControlledTransaction`) used here. */
interface KyselyTransaction {
  readonly isTransaction: boolean;
  selectFrom: unknown;
  executeQuery(query: unknown): Promise<unknown>;
}

/** The part of a Drizzle database or transaction used here. */
interface DrizzleDatabase {
  select: unknown;
  transaction: unknown;
  /** Only on a transaction. */
  rollback?: unknown;
  execute(query: unknown): Promise<unknown>;
}

/** Every handle this module knows, for the message that refuses any other. */
const KNOWN_HANDLES =
  'a TypeORM EntityManager or QueryRunner, a node-postgres or mysql2 client, a Knex ' +
  'transaction, a Prisma transaction client, a Kysely transaction or a Drizzle transaction';

/**
 * Runs `sql` through `tx`, the app's open transaction, on the transaction's own connection, so
 * the write commits or rolls back with the handler's. Resolves the driver's raw result: read it
 * with {@link resultRows} or {@link affectedRows}. The ORM's package (Kysely, Drizzle) is loaded
 * only when such a handle shows up, from the app's own install.
 * @throws TypeError for a handle plainly outside a transaction (a pool, a database, a manager
 *   without a transaction, an idle client): the completion would commit on its own, whatever
 *   became of the handler's writes. Also for a value that is no handle at all.
 */
export async function queryInTransaction(
  tx: unknown,
  sql: string,
  values: unknown[],
  placeholders: Placeholders,
  /** The store method, for messages. */
  operation = 'completeInTransaction',
): Promise<unknown> {
  const handle = checkedHandle(tx, operation);
  switch (handle?.kind) {
    case 'kysely': {
      const { CompiledQuery } = loadPeer<{
        CompiledQuery: { raw(sql: string, parameters: unknown[]): unknown };
      }>('kysely', 'the `transactional` option with Kysely');
      // Kysely hands the text to its driver as it is: either placeholder style reaches its database.
      return handle.tx.executeQuery(CompiledQuery.raw(sql, values));
    }
    case 'drizzle':
      return handle.tx.execute(drizzleSql(sql, values, placeholders));
    case 'prisma': {
      // MySQL's statements return no rows: Prisma reports their affected rows through execute.
      const method = placeholders === '?' ? '$executeRawUnsafe' : '$queryRawUnsafe';
      return handle.tx[method](sql, ...values);
    }
    case 'knex': {
      // Knex binds `?` in order: one binding per placeholder, so $1 used twice binds twice.
      const bindings: unknown[] = placeholders === '?' ? values : [];
      const text =
        placeholders === '?'
          ? sql
          : sql.replace(PLACEHOLDER, (_, n: string) => {
              bindings.push(values[Number(n) - 1]);
              return '?';
            });
      return handle.tx.raw(text, bindings);
    }
    case 'query':
      return handle.tx.query(sql, values);
    default:
      throw new TypeError(`${operation}: tx must be ${KNOWN_HANDLES}, got ${describeValue(tx)}`);
  }
}

/**
 * The rows of a statement run through {@link queryInTransaction}: TypeORM's `query()` and Prisma
 * return the rows, node-postgres, Knex (pg), Kysely and Drizzle (node-postgres) `{ rows }`.
 */
export function resultRows(result: unknown): unknown[] {
  if (Array.isArray(result)) return result;
  const rows = (result as { rows?: unknown } | null)?.rows;
  if (Array.isArray(rows)) return rows;
  throw unexpected(result);
}

/**
 * Rows a statement run through {@link queryInTransaction} changed: TypeORM's `query()` returns
 * mysql2's OK packet, mysql2, Knex and Drizzle (mysql2) `[packet, fields]`, Prisma's execute a
 * number, Kysely `numAffectedRows` (a bigint).
 */
export function affectedRows(result: unknown): number {
  if (typeof result === 'number') return result;
  const packet = (Array.isArray(result) ? result[0] : result) as {
    affectedRows?: unknown;
    numAffectedRows?: unknown;
  } | null;
  if (typeof packet?.affectedRows === 'number') return packet.affectedRows;
  if (typeof packet?.numAffectedRows === 'bigint') return Number(packet.numAffectedRows);
  throw unexpected(result);
}

/**
 * Checks `tx` as {@link queryInTransaction} does and returns it unchanged.
 * @deprecated for the transition only: the stores take `txHost.tx` as it is; callers that still
 *   pass it through here get the same handle back (refused if it is plainly no transaction).
 */
export function queryableTransaction(tx: unknown): unknown {
  checkedHandle(tx);
  return tx;
}

/** Matches a `$n` placeholder of the PostgreSQL store's statements. */
const PLACEHOLDER = /\$(\d+)/g;
/** Matches a placeholder of either store's statements (neither has `?` or `$` in a literal). */
const ANY_PLACEHOLDER = { $n: PLACEHOLDER, '?': /\?/g } as const;

type RawCall = (sql: string, ...values: unknown[]) => Promise<unknown>;

/** A handle by kind, each with the calls used here; the first kind that matches wins. */
type Handle =
  | { kind: 'kysely'; tx: KyselyTransaction }
  | { kind: 'drizzle'; tx: DrizzleDatabase }
  | { kind: 'prisma'; tx: Record<'$queryRawUnsafe' | '$executeRawUnsafe', RawCall> }
  | { kind: 'knex'; tx: { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> } }
  | { kind: 'query'; tx: { query(sql: string, values: unknown[]): Promise<unknown> } };

/** The parts of a `query()` handle that tell whether it is inside a transaction. */
interface QueryHandle {
  totalCount?: unknown;
  getConnection?: unknown;
  getRepository?: unknown;
  queryRunner?: { isTransactionActive?: boolean };
  isTransactionActive?: boolean;
  getTransactionStatus?: () => string | undefined;
}

/**
 * `tx` by kind, or undefined for a value that is no handle. Refuses handles plainly outside a
 * transaction, where the completion would commit on its own whatever becomes of the handler's
 * writes: a Kysely or Drizzle database, a pg or mysql2 pool, a TypeORM manager without a
 * transaction, a node-postgres client that reports it is idle. (A Knex instance or a Prisma
 * client outside a transaction cannot be told from a transaction.)
 */
function checkedHandle(tx: unknown, operation = 'completeInTransaction'): Handle | undefined {
  const handle = tx as Partial<KyselyTransaction & DrizzleDatabase> &
    Record<string, unknown> &
    QueryHandle;
  if (tx === null || (typeof tx !== 'object' && typeof tx !== 'function')) return undefined;
  if (
    typeof handle.executeQuery === 'function' &&
    typeof handle.selectFrom === 'function' &&
    typeof handle.isTransaction === 'boolean'
  ) {
    if (!handle.isTransaction) throw notInTransaction('a Kysely instance', operation);
    return { kind: 'kysely', tx: tx as KyselyTransaction };
  }
  if (
    typeof handle.execute === 'function' &&
    typeof handle.select === 'function' &&
    typeof handle.transaction === 'function'
  ) {
    if (typeof handle.rollback !== 'function') {
      throw notInTransaction('a Drizzle database', operation);
    }
    return { kind: 'drizzle', tx: tx as DrizzleDatabase };
  }
  if (typeof handle.$queryRawUnsafe === 'function') {
    return { kind: 'prisma', tx: tx as Extract<Handle, { kind: 'prisma' }>['tx'] };
  }
  if (typeof handle.raw === 'function') {
    return { kind: 'knex', tx: tx as Extract<Handle, { kind: 'knex' }>['tx'] };
  }
  if (typeof handle.query !== 'function') return undefined;
  const pool = typeof handle.totalCount === 'number' || typeof handle.getConnection === 'function';
  const manager = typeof handle.getRepository === 'function' && !('isTransactionActive' in handle);
  const idle =
    pool ||
    handle.isTransactionActive === false ||
    (manager && !handle.queryRunner?.isTransactionActive) ||
    (typeof handle.getTransactionStatus === 'function' && handle.getTransactionStatus() === 'I');
  if (idle) {
    throw new TypeError(
      `${operation}: tx is not inside a transaction (a pool, a manager without a ` +
        `transaction, or an idle client): the ${written(operation)} would commit on its own`,
    );
  }
  return { kind: 'query', tx: tx as Extract<Handle, { kind: 'query' }>['tx'] };
}

/**
 * `sql` as a Drizzle SQL object, each placeholder a bound parameter (a `$n` used twice binds
 * twice), so the driver marks them in its own style.
 */
function drizzleSql(sql: string, values: unknown[], placeholders: Placeholders): unknown {
  const drizzle = loadPeer<{
    sql: ((strings: TemplateStringsArray, ...params: unknown[]) => unknown) & {
      param(value: unknown): unknown;
    };
  }>('drizzle-orm', 'the `transactional` option with Drizzle');
  const strings: string[] = [];
  const params: unknown[] = [];
  let last = 0;
  let next = 0;
  for (const match of sql.matchAll(ANY_PLACEHOLDER[placeholders])) {
    strings.push(sql.slice(last, match.index));
    const value = placeholders === '?' ? values[next++] : values[Number(match[1]) - 1];
    params.push(drizzle.sql.param(value));
    last = match.index + match[0].length;
  }
  strings.push(sql.slice(last));
  return drizzle.sql(Object.assign(strings, { raw: strings }), ...params);
}

function notInTransaction(what: string, operation: string): TypeError {
  return new TypeError(
    `${operation}: tx is ${what}, not a transaction: the ${written(operation)} would commit on ` +
      'its own',
  );
}

/** What `operation` writes, for messages: the completion, or the step. */
function written(operation: string): string {
  return operation === 'recordStepInTransaction' ? 'step' : 'completion';
}

function unexpected(result: unknown): TypeError {
  return new TypeError(`completeInTransaction: unexpected query result ${describeValue(result)}`);
}
