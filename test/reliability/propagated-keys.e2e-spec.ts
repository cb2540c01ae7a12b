import { Controller } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Idempotent } from '../../lib';
import { type Consumer, startConsumer, transportSetup } from '../support/microservice-app';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';
import { AppProcess, buildLibrary } from './app-process';
import { driveAll, KillSchedule } from './stream';

/**
 * Exactly-once effects beyond our own database (issue 28's proof). A payments app on Redis in its
 * own process (fixtures/charging-process.js) charges a provider, then waits before it answers; a
 * retrying client drives many keys through it while the test SIGKILLs it at random points and
 * restarts it. The provider deduplicates by `Idempotency-Key` and counts charges per payment:
 * a small HTTP server here, or a second Nest service (TCP) with `@Idempotent()`. A crash after
 * the charge and before the completion runs the handler again on retry: without `propagateKeys`
 * it charges again; with it the re-run sends the first run's key, and the provider answers the
 * first charge. Charges are counted by the provider, never through the module.
 * RELIABILITY_FULL=1 (npm run test:reliability) runs a bigger storm.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const RUN = FULL ? { keys: 1_000, kills: 10, inFlight: 40 } : { keys: 80, kills: 3, inFlight: 20 };
const LOCK_TTL = 1_000;
/** The handler waits a random 0 to HOLD_MS ms between its charge and its answer. */
const HOLD_MS = 60;
const MAX_ATTEMPTS = 200;
const SECRET = randomUUID() + randomUUID();
const PATTERN = `provider.charge.${randomUUID().slice(0, 8)}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Charges per payment, as the provider counts them. */
class Ledger {
  readonly charges = new Map<string, number>();
  private ids = 0;

  charge(payment: string): number {
    this.charges.set(payment, (this.charges.get(payment) ?? 0) + 1);
    return ++this.ids;
  }

  total(): number {
    return [...this.charges.values()].reduce((sum, n) => sum + n, 0);
  }
}

/** A payment provider over HTTP that deduplicates by Idempotency-Key, as Stripe does. */
async function startHttpProvider(ledger: Ledger): Promise<{ server: Server; url: string }> {
  const seen = new Map<string, number>();
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const { payment } = JSON.parse(Buffer.concat(chunks).toString()) as { payment: string };
      const key = request.headers['idempotency-key'] as string | undefined;
      let id = key === undefined ? undefined : seen.get(key);
      if (id === undefined) {
        id = ledger.charge(payment);
        if (key !== undefined) seen.set(key, id);
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ id }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let rpcLedger: Ledger;

/** The second Nest service: charges once per key with `@Idempotent()`. */
@Controller()
class ChargesService {
  @MessagePattern(PATTERN)
  @Idempotent()
  charge(@Payload() command: { payment: string }) {
    return { id: rpcLedger.charge(command.payment) };
  }
}

describe('exactly-once charges at a provider, through propagated keys', () => {
  const prefix = uniquePrefix('propagated-keys');
  const apps: AppProcess[] = [];
  let redis: Redis;

  beforeAll(async () => {
    buildLibrary();
    redis = inspectionClient();
    await redis.ping().catch((error: Error) => {
      throw new Error(`these tests need Redis at ${testRedisUrl()}: ${error.message}`);
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop('SIGKILL')));
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  /**
   * Drives RUN.keys payments through the app with a retrying client while SIGKILLing it
   * RUN.kills times at random points and restarting it. Returns the keys and how many charges
   * a killed app made for a request it never answered (the crash window, hit).
   */
  async function crashRun(env: Record<string, string>) {
    const runId = randomUUID().slice(0, 8);
    const keys = Array.from({ length: RUN.keys }, (_, i) => `pay-${runId}-${i}`);
    const answered = new Set<string>(); // `${pid} ${key}` the app answered with a 2xx
    const victims: AppProcess[] = [];
    const launch = async () => {
      const app = await AppProcess.start(
        {
          REDIS_URL: testRedisUrl(),
          KEY_PREFIX: `${prefix}${runId}:`,
          LOCK_TTL: String(LOCK_TTL),
          HOLD_MS: String(HOLD_MS),
          KEY_SECRET: SECRET,
          ...env,
        },
        'charging-process.js',
      );
      apps.push(app);
      return app;
    };
    let current = launch();
    await current;
    const kill = async () => {
      const victim = await current;
      await sleep(Math.random() * HOLD_MS); // a random point, not a synchronisation
      victims.push(victim);
      await victim.stop('SIGKILL');
      current = launch();
      await current;
    };
    // Kill points spread over the run by completed keys, each at a random moment of a hold.
    const schedule = new KillSchedule(RUN.keys, RUN.kills, kill);
    const drive = async (key: string) => {
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const app = await current;
        const response = await post(app.url, '/payments', { key, body: { amount: 100 } }).catch(
          () => undefined, // the app died under the request: the outcome is unknown, retry
        );
        if (response && response.status < 300) {
          answered.add(`${app.pid} ${key}`);
          schedule.progressed();
          return;
        }
        if (response && ![409, 503].includes(response.status)) {
          throw new Error(`${key}: unexpected ${response.status} ${response.text}`);
        }
        await sleep(20 + Math.random() * 40);
      }
      throw new Error(`${key}: no 2xx after ${MAX_ATTEMPTS} attempts`);
    };
    await driveAll(keys, RUN.inFlight, drive);
    await schedule.settled();
    await (await current).stop('SIGKILL');
    const cutAfterCharge = victims.flatMap((victim) =>
      victim.reports('CHARGED').filter((key) => !answered.has(`${victim.pid} ${key}`)),
    );
    return { keys, kills: victims.length, cutAfterCharge: cutAfterCharge.length };
  }

  function tally(name: string, ledger: Ledger, run: Awaited<ReturnType<typeof crashRun>>) {
    const charges = ledger.total();
    const twice = run.keys.filter((key) => (ledger.charges.get(key) ?? 0) > 1);
    const never = run.keys.filter((key) => !ledger.charges.get(key));
    console.log(
      `${name}: ${run.keys.length} payments, ${run.kills} SIGKILLs, ${charges} charges ` +
        `(${twice.length} payments charged more than once); ${run.cutAfterCharge} requests cut ` +
        'by a kill after their charge',
    );
    expect(run.kills).toBe(RUN.kills);
    expect(never).toEqual([]);
    // The crash window was hit: a killed app had charged and never answered.
    expect(run.cutAfterCharge).toBeGreaterThan(0);
    return { charges, twice };
  }

  describe('HTTP provider, charged with fetch', () => {
    let provider: { server: Server; url: string };
    let ledger: Ledger;

    beforeEach(async () => {
      ledger = new Ledger();
      provider = await startHttpProvider(ledger);
    });
    afterEach(() => provider.server.close());

    it(`without propagateKeys: a crash after the charge charges again (charges > payments)`, async () => {
      const run = await crashRun({ PROVIDER: 'http', PROVIDER_URL: provider.url, PROPAGATE: '0' });
      const { charges } = tally('fetch, without propagateKeys', ledger, run);
      expect(charges).toBeGreaterThan(run.keys.length);
    }, 300_000);

    it(`with propagateKeys: charges == payments`, async () => {
      const run = await crashRun({ PROVIDER: 'http', PROVIDER_URL: provider.url, PROPAGATE: '1' });
      const { charges, twice } = tally('fetch, with propagateKeys', ledger, run);
      expect(twice).toEqual([]);
      expect(charges).toBe(run.keys.length);
    }, 300_000);
  });

  describe('a second Nest service with @Idempotent(), charged through ClientProxy (TCP)', () => {
    let service: Consumer;
    let port: number;

    beforeEach(async () => {
      rpcLedger = new Ledger();
      const setup = await transportSetup('tcp');
      port = setup.options.port as number;
      service = await startConsumer(
        setup,
        { redis: testRedisUrl(), keyPrefix: `${prefix}service:${randomUUID().slice(0, 8)}:` },
        { controllers: [ChargesService] },
      );
    });
    afterEach(() => service.close());

    const env = (propagate: string) => ({
      PROVIDER: 'rpc',
      RPC_PORT: String(port),
      RPC_PATTERN: PATTERN,
      PROPAGATE: propagate,
    });

    it(`without propagateKeys: a crash after the charge charges again (charges > payments)`, async () => {
      const run = await crashRun(env('0'));
      const { charges } = tally('ClientProxy, without propagateKeys', rpcLedger, run);
      expect(charges).toBeGreaterThan(run.keys.length);
    }, 300_000);

    it(`with propagateKeys: charges == payments`, async () => {
      const run = await crashRun(env('1'));
      const { charges, twice } = tally('ClientProxy, with propagateKeys', rpcLedger, run);
      expect(twice).toEqual([]);
      expect(charges).toBe(run.keys.length);
    }, 300_000);
  });
});
