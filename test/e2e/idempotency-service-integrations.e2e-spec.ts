import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  derivedIdempotencyKey,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyRecordUnreadableError,
  IdempotencyService,
} from '../../lib';
import { deferred } from '../support/test-app';
import { STORES } from '../support/redis';
import { storeSuite } from '../support/wrapped-store';

const KEY_A = randomBytes(32);
const KEY_B = randomBytes(32);
const DERIVATION_SECRET = randomBytes(32);

/**
 * What IdempotencyService.run() shares with @Idempotent() handlers: results sealed with
 * `encryption`, derivedIdempotencyKey() inside fn, heartbeats stopped at shutdown.
 */
describe.each(STORES)('IdempotencyService.run() on the %s store', (kind) => {
  const suite = storeSuite(kind);

  /** A service on the suite's store; `keys` turns encryption on. */
  async function start(
    keys?: Buffer[],
    options: IdempotencyModuleOptions = {},
  ): Promise<IdempotencyService> {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          store: suite.real.store,
          keyPrefix: suite.real.keyPrefix,
          ...(keys && { encryption: { keys } }),
          ...options,
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    suite.track(app);
    return app.get(IdempotencyService);
  }

  it('seals the result with `encryption` and replays it', async () => {
    const plain = await start();
    const plainSecret = `card-${randomUUID()}`;
    await plain.run(randomUUID(), () => ({ card: plainSecret }));
    const sealed = await start([KEY_A]);
    const secret = `card-${randomUUID()}`;
    const key = randomUUID();
    let runs = 0;
    const fn = () => ({ card: secret, at: new Date(7), runs: ++runs });
    const first = await sealed.run(key, fn);
    if (kind === 'redis') {
      const stored = (await suite.real.rawBytes()).toString('latin1');
      // The unsealed result is there as text, so the sealed one would be found if it were.
      expect(stored).toContain(plainSecret);
      expect(stored).not.toContain(secret);
    }
    const again = await sealed.run(key, fn);
    expect(runs).toBe(1);
    expect(again).toEqual({ card: secret, at: new Date(7), runs: 1 });
    expect(again).toEqual(first);
  });

  it('throws IdempotencyRecordUnreadableError for a result no key set opens, without running fn', async () => {
    const key = randomUUID();
    await (await start([KEY_A])).run(key, () => 'sealed with A');
    let runs = 0;
    const other = await start([KEY_B]);
    await expect(other.run(key, () => `ran ${++runs}`)).rejects.toBeInstanceOf(
      IdempotencyRecordUnreadableError,
    );
    expect(runs).toBe(0);
    // With the old key among the keys, it opens again.
    await expect((await start([KEY_B, KEY_A])).run(key, () => 'again')).resolves.toBe(
      'sealed with A',
    );
  });

  it('derives the same key inside fn on a retry after a failure, another for another key', async () => {
    const service = await start(undefined, { keyDerivationSecret: DERIVATION_SECRET });
    const key = randomUUID();
    const derived: string[] = [];
    await expect(
      service.run(key, () => {
        derived.push(derivedIdempotencyKey('charge'));
        throw new Error('gateway down');
      }),
    ).rejects.toThrow('gateway down');
    // The failure released the key: the retry (here on another replica) runs fn again, and must
    // charge under the same key.
    const replica = await start(undefined, { keyDerivationSecret: DERIVATION_SECRET });
    await replica.run(key, () => derived.push(derivedIdempotencyKey('charge')));
    await service.run(randomUUID(), () => derived.push(derivedIdempotencyKey('charge')));
    expect(derived).toHaveLength(3);
    expect(derived[1]).toBe(derived[0]);
    expect(derived[2]).not.toBe(derived[0]);
  });

  it('stops renewing a running call lease at app.close(): another replica takes the key over', async () => {
    const closing = await start(undefined, { lockTtl: 1_000 });
    const key = randomUUID();
    const started = deferred();
    const gate = deferred();
    const hung = closing.run(key, async () => {
      started.resolve();
      await gate.promise;
      return 'hung';
    });
    await started.promise;
    await suite.apps.shift()?.close();
    // Renewed forever, the lease would make this wait out its 10 s and throw in progress.
    const replica = await start(undefined, { lockTtl: 1_000, waitTimeout: 10_000 });
    await expect(replica.run(key, () => 'retried')).resolves.toBe('retried');
    gate.resolve();
    // The hung call's late result is fenced: the replica's stays.
    await expect(hung).resolves.toBe('hung');
    await expect(replica.run(key, () => 'again')).resolves.toBe('retried');
  }, 20_000);
});
