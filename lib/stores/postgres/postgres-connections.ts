import type { Client, Pool } from 'pg';
import { within } from '../sql/errors';

/** How long close() waits for the pool to end before it cuts the connections, in ms. */
const CLOSE_TIMEOUT_MS = 2_000;

/**
 * The connections a PostgreSQL store's close() waits for: every one of a pool it owns, and its
 * LISTEN connection (tracked by the listener). It cuts those still open after
 * {@link CLOSE_TIMEOUT_MS} (a frozen server).
 */
export class PostgresConnections {
  private readonly clients = new Set<Client>();

  constructor(
    private readonly pool: Pool,
    private readonly ownsPool: boolean,
  ) {
    if (ownsPool) pool.on('connect', (client) => this.track(client));
  }

  /** Keeps `client` until its connection ends. */
  track(client: Client): void {
    this.clients.add(client);
    client.once('end', () => this.clients.delete(client));
  }

  /** Ends the pool if the store owns it, and waits (bounded) for every tracked connection. */
  async end(): Promise<void> {
    const ended = this.ownsPool ? this.pool.end().catch(() => {}) : undefined;
    const open = [...this.clients].map(
      (client) => new Promise((resolve) => client.once('end', resolve)),
    );
    if ((await within(Promise.all([ended, ...open]), CLOSE_TIMEOUT_MS)) === 'timeout') {
      // A frozen server neither answers a query in flight nor acknowledges a goodbye, and
      // node-postgres waits for both: cut the sockets (their queries fail, the pool ends).
      this.clients.forEach((client) => client.connection.stream.destroy());
      await within(Promise.all([ended]), CLOSE_TIMEOUT_MS);
    }
  }
}
