import type { Logger } from '@nestjs/common';
import type { Client, Notification, Pool, PoolClient } from 'pg';
import type { Watchers } from '../sql/watchers';

/** Delay before the LISTEN connection is opened again after it failed, in ms. */
const RELISTEN_DELAY_MS = 1_000;

/**
 * The PostgreSQL store's LISTEN connection: one connection of the pool, held from the first wait
 * until the store closes, on one channel named like the table. A notification's payload is an
 * outcome character and the record key; every watcher of that key is woken (and claims again).
 */
export class PostgresListener {
  /** The LISTEN connection, resolved once LISTEN is active; undefined while there is none. */
  private listening?: Promise<PoolClient>;
  /** The connection `listening` resolved to. */
  private client?: PoolClient;
  private relisten?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly channel: string,
    private readonly watchers: Watchers,
    private readonly logger: Logger,
    /** Called with every connection this opens, so that the store's close() can wait for it. */
    private readonly track: (client: Client) => void,
  ) {}

  /** Resolves once LISTEN is active (opening the connection on first use). */
  listen(): Promise<PoolClient> {
    return (this.listening ??= this.open().catch((error: unknown) => {
      this.listening = undefined;
      throw error;
    }));
  }

  /** Drops the connection; one still opening is dropped by open(), which checks `closed`. */
  close(): void {
    this.closed = true;
    clearTimeout(this.relisten);
    if (this.client) dropClient(this.client);
    this.listening = this.client = undefined;
  }

  private async open(): Promise<PoolClient> {
    const client = await this.pool.connect();
    // Without an 'error' listener a lost connection would crash the process.
    client.on('error', (error) => this.lost(client, error));
    client.on('notification', (message) => this.dispatch(message));
    this.track(client);
    try {
      // One identifier, dot included: pg_notify() names the channel by the same string.
      await client.query(`LISTEN "${this.channel}"`);
    } catch (error) {
      dropClient(client);
      throw error;
    }
    if (this.closed) {
      dropClient(client);
      throw new Error('the idempotency store is closed');
    }
    return (this.client = client);
  }

  private dispatch(message: Notification): void {
    if (message.channel !== this.channel || !message.payload) return;
    // The first character is the outcome (Outcome); waiters claim again whatever it is.
    this.watchers.wake(message.payload.slice(1));
  }

  /**
   * The LISTEN connection failed: notifications sent until it is back are lost, so once it is,
   * every watcher is woken to claim again (as after a notification).
   */
  private lost(client: PoolClient, error: Error): void {
    dropClient(client);
    // A connection that failed while opening: its watch() call reports the error.
    if (this.client !== client) return;
    this.listening = this.client = undefined;
    if (this.closed) return;
    this.logger.warn(`PostgreSQL LISTEN connection lost (${error.message}); reopening it`);
    const reopen = () => {
      if (this.closed || this.watchers.size === 0) return;
      this.listen().then(
        () => this.watchers.wakeAll(),
        () => {
          this.relisten = setTimeout(reopen, RELISTEN_DELAY_MS);
          this.relisten.unref();
        },
      );
    };
    this.relisten = setTimeout(reopen, RELISTEN_DELAY_MS);
    this.relisten.unref();
  }
}

/** Gives a client back to its pool to be destroyed (once; a second release would throw). */
function dropClient(client: PoolClient): void {
  const dropped = client as PoolClient & { idempotencyDropped?: boolean };
  if (dropped.idempotencyDropped) return;
  dropped.idempotencyDropped = true;
  client.release(true);
}
