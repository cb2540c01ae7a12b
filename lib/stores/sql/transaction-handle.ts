import { describeValue } from './errors';

/**
 * A transaction a SQL store's `completeInTransaction` can write through: whatever the app's
 * `TransactionHost` (`@nestjs-cls/transactional`) exposes as `tx`.
 */
export type TransactionHandle =
  /** Prisma's interactive transaction client. */
  | { $queryRawUnsafe(sql: string, ...values: unknown[]): Promise<unknown> }
  /** A Knex transaction (`?` placeholders). */
  | { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> }
  /** A TypeORM EntityManager or QueryRunner, a node-postgres client, a mysql2 connection. */
  | { query(sql: string, values: unknown[]): Promise<unknown> };

/** How a statement marks its parameters: PostgreSQL's `$n` or MySQL's `?`. */
export type Placeholders = '$n' | '?';

/**
 * Runs `sql` through a transaction handle and returns the driver's raw result (rows, `{ rows }`,
 * a mysql2 `[result, fields]` pair or an OK packet): each store reads what it asked for.
 */
export async function queryThrough(
  tx: unknown,
  sql: string,
  values: unknown[],
  placeholders: Placeholders,
): Promise<unknown> {
  const handle = tx as Partial<
    Record<'$queryRawUnsafe' | '$executeRawUnsafe' | 'raw' | 'query', unknown>
  >;
  if (tx && typeof handle.$queryRawUnsafe === 'function') {
    const prisma = tx as Record<string, (sql: string, ...values: unknown[]) => Promise<unknown>>;
    // MySQL's statements return no rows: Prisma reports their affected rows through execute.
    const method = placeholders === '?' ? '$executeRawUnsafe' : '$queryRawUnsafe';
    return prisma[method](sql, ...values);
  }
  if (tx && typeof handle.raw === 'function') {
    // Knex binds `?` in order: one binding per placeholder, so $1 used twice binds twice.
    const bindings: unknown[] = placeholders === '?' ? values : [];
    const text =
      placeholders === '?'
        ? sql
        : sql.replace(/\$(\d+)/g, (_, n: string) => {
            bindings.push(values[Number(n) - 1]);
            return '?';
          });
    const knex = tx as { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> };
    return knex.raw(text, bindings);
  }
  if (tx && typeof handle.query === 'function') {
    assertInTransaction(tx);
    return (tx as { query(sql: string, values: unknown[]): Promise<unknown> }).query(sql, values);
  }
  throw new TypeError(
    'completeInTransaction: tx must be a TypeORM EntityManager or QueryRunner, a node-postgres ' +
      `or mysql2 client, a Knex transaction or a Prisma transaction client, got ${describeValue(tx)}`,
  );
}

/**
 * Refuses handles that are plainly outside a transaction, where the completion would commit on
 * its own whatever becomes of the handler's writes: a pg or mysql2 pool, a TypeORM manager
 * without a transaction, a node-postgres client that reports it is idle.
 */
function assertInTransaction(tx: object): void {
  const handle = tx as {
    totalCount?: unknown;
    getConnection?: unknown;
    getRepository?: unknown;
    queryRunner?: { isTransactionActive?: boolean };
    isTransactionActive?: boolean;
    getTransactionStatus?: () => string | undefined;
  };
  const pool = typeof handle.totalCount === 'number' || typeof handle.getConnection === 'function';
  const manager = typeof handle.getRepository === 'function' && !('isTransactionActive' in handle);
  const idle =
    pool ||
    handle.isTransactionActive === false ||
    (manager && !handle.queryRunner?.isTransactionActive) ||
    (typeof handle.getTransactionStatus === 'function' && handle.getTransactionStatus() === 'I');
  if (idle) {
    throw new TypeError(
      'completeInTransaction: tx is not inside a transaction (a pool, a manager without a ' +
        'transaction, or an idle client): the completion would commit on its own',
    );
  }
}
