import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/** A TCP proxy on loopback in front of a server, which a test can freeze to play a hung server. */
export interface TcpProxy {
  /** The proxy's own port on 127.0.0.1. */
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /**
   * Stops forwarding, both ways, on every connection, current and new: the sockets stay open and
   * nothing is answered, as with a frozen server or a silent network partition.
   */
  freeze(): void;
  /** Forwards again what was held and everything after it. */
  thaw(): void;
  /**
   * Cuts the connection that next carries a reply from the server, dropping the reply: the
   * command reached the server, its answer never reaches the client.
   */
  cutOnNextReply(): void;
  /** Cuts every connection (as a crashed server would) and stops listening. */
  close(): Promise<void>;
}

/** Starts a {@link TcpProxy} to `host:port` on a free port of 127.0.0.1. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let frozen = false;
  let cutting = false;
  let accepted = 0;

  /** Copies `from` to `to`, with backpressure, holding data while the proxy is frozen. */
  const forward = (from: Socket, to: Socket, replies: boolean) => {
    from.on('data', (chunk) => {
      if (replies && cutting) {
        cutting = false;
        from.destroy();
        to.destroy();
        return;
      }
      if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      if (!frozen) from.resume();
    });
    from.on('end', () => to.end());
    from.on('error', () => to.destroy());
    from.on('close', () => to.destroy());
  };

  const server = createServer((client) => {
    accepted++;
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      if (frozen) socket.pause();
    }
    forward(client, upstream, false);
    forward(upstream, client, true);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP port for the proxy');

  return {
    port: address.port,
    get accepted() {
      return accepted;
    },
    freeze() {
      frozen = true;
      sockets.forEach((socket) => socket.pause());
    },
    thaw() {
      frozen = false;
      sockets.forEach((socket) => socket.resume());
    },
    cutOnNextReply() {
      cutting = true;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      sockets.forEach((socket) => socket.destroy());
      await closed;
    },
  };
}
