import { loadPeer } from '../../utils/load-optional';

/** A transaction handle the SQL stores write through: `query(sql, values)` resolving `{ rows }`. */
interface Queryable {
  query(sql: string, values: unknown[]): Promise<unknown>;
}

/** The part of a Kysely `Transaction` (or `ControlledTransaction`) used here. */
interface KyselyTransaction {
  readonly isTransaction: boolean;
  selectFrom: unknown;
  executeQuery(query: unknown): Promise<unknown>;
}

/** The part of a Drizzle database or transaction (`db.transaction(tx => ...)`) used here. */
interface DrizzleDatabase {
  select: unknown;
  transaction: unknown;
  /** Only on a transaction. */
  rollback?: unknown;
  execute(query: unknown): Promise<unknown>;
}

/** Matches a `$n` placeholder of the stores' statements. */
const PLACEHOLDER = /\$(\d+)/g;

/**
 * The handle the store writes a completion through (`transactional`), for the ORMs whose
 * `txHost.tx` has none of the calls the stores know (`query()`, Knex's `raw()`, Prisma's
 * `$queryRawUnsafe()`): a Kysely or Drizzle transaction becomes `{ query(sql, values) }` over the
 * ORM's own raw-query call, so the completion runs on the transaction's connection and commits or
 * rolls back with it. Any other handle is returned as it is. The ORM's package is loaded only when
 * such a handle shows up, from the app's own install.
 * @throws TypeError for a Kysely or Drizzle instance that is not a transaction: the completion
 *   would commit on its own, whatever became of the handler's writes.
 */
export function queryableTransaction(tx: unknown): unknown {
  if (isKysely(tx)) {
    if (!tx.isTransaction) throw notInTransaction('a Kysely instance');
    const { CompiledQuery } = loadPeer<{
      CompiledQuery: { raw(sql: string, parameters: unknown[]): unknown };
    }>('kysely', 'the `transactional` option with Kysely');
    return {
      query: (sql, values) => tx.executeQuery(CompiledQuery.raw(sql, values)),
    } satisfies Queryable;
  }
  if (isDrizzle(tx)) {
    if (typeof tx.rollback !== 'function') throw notInTransaction('a Drizzle database');
    return { query: (sql, values) => tx.execute(drizzleSql(sql, values)) } satisfies Queryable;
  }
  return tx;
}

function isKysely(tx: unknown): tx is KyselyTransaction {
  const handle = tx as Partial<KyselyTransaction> | null;
  return (
    typeof handle?.executeQuery === 'function' &&
    typeof handle.selectFrom === 'function' &&
    typeof handle.isTransaction === 'boolean'
  );
}

function isDrizzle(tx: unknown): tx is DrizzleDatabase {
  const handle = tx as Partial<DrizzleDatabase> | null;
  return (
    typeof handle?.execute === 'function' &&
    typeof handle.select === 'function' &&
    typeof handle.transaction === 'function'
  );
}

/**
 * `sql` with `$n` placeholders as a Drizzle SQL object, each placeholder a bound parameter (a
 * placeholder used twice binds twice), so the driver numbers them itself.
 */
function drizzleSql(sql: string, values: unknown[]): unknown {
  const drizzle = loadPeer<{
    sql: ((strings: TemplateStringsArray, ...params: unknown[]) => unknown) & {
      param(value: unknown): unknown;
    };
  }>('drizzle-orm', 'the `transactional` option with Drizzle');
  const strings: string[] = [];
  const params: unknown[] = [];
  let last = 0;
  for (const match of sql.matchAll(PLACEHOLDER)) {
    strings.push(sql.slice(last, match.index));
    params.push(drizzle.sql.param(values[Number(match[1]) - 1]));
    last = match.index + match[0].length;
  }
  strings.push(sql.slice(last));
  return drizzle.sql(Object.assign(strings, { raw: strings }), ...params);
}

function notInTransaction(what: string): TypeError {
  return new TypeError(
    `completeInTransaction: tx is ${what}, not a transaction: the completion would commit on ` +
      'its own',
  );
}
