import type { ModuleRef } from '@nestjs/core';
import { loadPeer } from '../utils/load-optional';

/** The part of `@nestjs-cls/transactional`'s TransactionHost used here. */
export interface TransactionHost {
  readonly tx: unknown;
  withTransaction<R>(fn: () => Promise<R>): Promise<R>;
}

/** The option `transactional` when it is on. */
export type TransactionalOption = true | { connectionName?: string };

let hostToken: ((connectionName?: string) => unknown) | undefined;

/** The app's TransactionHost (`@nestjs-cls/transactional`) of a connection, from its container. */
export function transactionHost(
  moduleRef: ModuleRef | undefined,
  option: TransactionalOption,
): TransactionHost {
  hostToken ??= loadPeer<{ getTransactionHostToken: typeof hostToken }>(
    '@nestjs-cls/transactional',
    'the `transactional` option',
  ).getTransactionHostToken;
  if (!moduleRef) throw new Error('no ModuleRef to find the TransactionHost in');
  const token = hostToken!(option === true ? undefined : option.connectionName);
  return moduleRef.get<unknown, TransactionHost>(token as string, { strict: false });
}

/** The app's TransactionHosts, looked up once per connection name. */
export class Transactions {
  private readonly hosts = new Map<string | undefined, TransactionHost>();

  constructor(private readonly moduleRef?: ModuleRef) {}

  host(option: TransactionalOption): TransactionHost {
    const name = option === true ? undefined : option.connectionName;
    let host = this.hosts.get(name);
    if (!host) this.hosts.set(name, (host = transactionHost(this.moduleRef, option)));
    return host;
  }
}

/** Whether a store can write a completion inside the app's transaction (`transactional`). */
export function writesInTransactions(store: object): boolean {
  return typeof (store as { completeInTransaction?: unknown }).completeInTransaction === 'function';
}

/**
 * Why `transactional` cannot work with `store`, or undefined when it can: only a store that
 * writes in the app's transaction keeps the promise that the record commits with the handler's
 * writes.
 */
export function transactionalStoreProblem(store: object): string | undefined {
  if (writesInTransactions(store)) return undefined;
  return (
    "`transactional` needs a store that writes in the app's transaction (the PostgreSQL or " +
    `MySQL store: forRoot({ postgres }) or forRoot({ mysql })); ${store.constructor.name} cannot`
  );
}

/**
 * Fails at boot when a route asks for `transactional` (`options` of the module, controllers or
 * handlers) and the store cannot write inside the app's transaction, or the app registered no
 * TransactionHost for it: misconfigured, such a route could never keep its promise.
 */
export function assertTransactionalReady(
  wanted: TransactionalOption[],
  store: object,
  moduleRef: ModuleRef,
): void {
  if (wanted.length === 0) return;
  const problem = transactionalStoreProblem(store);
  if (problem) throw new Error(`IdempotencyModule: ${problem}`);
  for (const option of wanted) {
    try {
      transactionHost(moduleRef, option);
    } catch (error) {
      throw new Error(
        `IdempotencyModule: \`transactional\` needs @nestjs-cls/transactional's TransactionHost` +
          (option === true || !option.connectionName ? '' : ` "${option.connectionName}"`) +
          ` (register ClsModule with ClsPluginTransactional): ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
}
