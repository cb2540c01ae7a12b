import { Injectable, type INestApplicationContext, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyRecords,
  IdempotencyService,
  IdempotencyStore,
  type ListedState,
  type StoredResponse,
} from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { sqlDatabases, type SqlStore } from '../support/sql-databases';

/**
 * Listing on the SQL stores, beyond the shared contract (test/e2e/*-store.contract): half-done
 * runs made the honest way through the module, what the sweeper keeps for listing and what it
 * deletes, the abandoned mark across stores on pools of their own, and a table without migration
 * 003 (what it says, and ensureSchema adding it to a table in use), and ages past any record.
 */
const databases = sqlDatabases();
const stored = (text: string): StoredResponse => ({ meta: 'm', body: Buffer.from(text) });
const step = (index: number, name: string) => ({ index, name, result: stored(name) });
const claim = (token: string, leaseMs = 60_000, resumable = false) => ({
  token,
  fingerprint: 'fp',
  leaseMs,
  resumable,
  about: { route: 'POST /orders', label: `label of ${token}` },
});

beforeAll(async () => {
  for (const database of databases) await database.open();
});
afterAll(async () => {
  for (const database of databases) await database.close();
});

/** A provider whose order stops after its second step until `failing` is unset. */
@Injectable()
class Orders {
  readonly ran: string[] = [];
  failing = true;

  constructor(readonly idempotency: IdempotencyService) {}

  place(key: string): Promise<string> {
    return this.idempotency.run(
      key,
      async () => {
        for (const name of ['order', 'charge']) {
          await this.idempotency.step(name, async () => void this.ran.push(name));
        }
        if (this.failing) throw new Error('the warehouse is down');
        await this.idempotency.step('ship', async () => void this.ran.push('ship'));
        return 'placed';
      },
      { resumable: true },
    );
  }
}

async function boot(options: IdempotencyModuleOptions): Promise<INestApplicationContext> {
  @Module({ imports: [IdempotencyModule.forRoot(options)], providers: [Orders] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  await app.init();
  return app;
}

describe.each(databases)('$name store: listing', (database) => {
  const keysOf = async (store: SqlStore, prefix: string, state: ListedState) =>
    (await store.list({ prefix, state, limit: 50 })).items.map((item) => item.key);

  it('lists a resumable run whose third step threw as half done with its two steps, until its retry resumes and completes it', async () => {
    const keyPrefix = `listing-${randomUUID().slice(0, 8)}:`;
    const app = await boot({ ...database.option(database.table('run')), keyPrefix });
    try {
      const orders = app.get(Orders);
      const store = app.get(IdempotencyStore) as SqlStore;
      await expect(orders.place('order-1')).rejects.toThrow('the warehouse is down');
      const [item, ...others] = (
        await store.list({ prefix: keyPrefix, state: 'half_done', limit: 50 })
      ).items;
      expect(others).toEqual([]);
      expect(item.steps).toEqual([
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ]);
      expect(item.reported).toBe(false);
      expect(Math.abs(Date.now() - item.since)).toBeLessThan(5_000);
      expect(await store.countRecords(keyPrefix)).toEqual({
        running: 0,
        stuck: 0,
        half_done: 1,
        completed: 0,
      });

      orders.failing = false;
      await expect(orders.place('order-1')).resolves.toBe('placed');
      expect(orders.ran).toEqual(['order', 'charge', 'ship']);
      expect(await keysOf(store, keyPrefix, 'half_done')).toEqual([]);
      expect(await keysOf(store, keyPrefix, 'completed')).toEqual([item.key]);
    } finally {
      await app.close();
    }
  });

  it('answers any age a list query can name: a billion days older lists nothing, newer lists all', async () => {
    const keyPrefix = `ages-${randomUUID().slice(0, 8)}:`;
    const app = await boot({ ...database.option(database.table('ages')), keyPrefix });
    try {
      await expect(app.get(Orders).place('order-1')).rejects.toThrow('the warehouse is down');
      const records = app.get(IdempotencyRecords);
      const list = (query: { olderThan?: string; newerThan?: string }) =>
        records.list({ state: 'half_done', ...query });
      const ages = ['1000000000d', '99999999999999999999'];
      for (const age of ages) {
        await expect(list({ olderThan: age })).resolves.toEqual({ items: [] });
        expect((await list({ newerThan: age })).items).toHaveLength(1);
        expect((await list({ olderThan: '0', newerThan: age })).items).toHaveLength(1);
      }
      await expect(list({ olderThan: ages[1], newerThan: ages[0] })).rejects.toThrow(
        'olderThan must not be more than newerThan',
      );
    } finally {
      await app.close();
    }
  });

  it('keeps from the sweeper what listing shows: a claim that died (a day from its claim), a half-done run (while its steps live)', async () => {
    const table = database.table('sweep');
    const store = database.store(table);
    const prefix = `sweep-${randomUUID().slice(0, 8)}:`;
    const key = () => `${prefix}{${randomUUID()}}`;
    const [died, halfDone, released, expired] = [key(), key(), key(), key()];
    await store.claim(died, claim('dead', 1));
    await store.claim(halfDone, claim('a', 60_000, true));
    expect(await store.recordStep(halfDone, 'a', step(0, 'order'), 60_000)).toBe(true);
    expect(await store.release(halfDone, 'a')).toBe(true);
    await store.claim(released, claim('b'));
    expect(await store.release(released, 'b')).toBe(true);
    await store.claim(expired, claim('c'));
    expect(await store.complete(expired, 'c', stored('done'), 1)).toBe(true);
    // Every lease and retention above has run out on the database's clock.
    await new Promise((resolve) => setTimeout(resolve, 20));

    expect(await store.sweep()).toBe(2);
    expect(await keysOf(store, prefix, 'stuck')).toEqual([died]);
    expect(await keysOf(store, prefix, 'half_done')).toEqual([halfDone]);

    // A day after its claim, the claim that died is forgotten; when its steps expire, so is
    // the half-done run (record and steps).
    const t = database.quote(table);
    const ago = database.inSeconds(-86_401);
    const steps = database.quote(`${table}_steps`);
    const keyColumn = database.quote('key');
    await database.query(`UPDATE ${t} SET claimed_at = ${ago} WHERE ${keyColumn} = '${died}'`);
    await database.query(
      `UPDATE ${steps} SET expires_at = ${ago} WHERE ${keyColumn} = '${halfDone}'`,
    );
    expect(await store.sweep()).toBe(2 + 1);
    for (const state of ['running', 'stuck', 'half_done', 'completed'] as const) {
      expect(await keysOf(store, prefix, state)).toEqual([]);
    }
    await store.close();
  });

  it('keeps apart prefixes that differ where one holds a wildcard of LIKE (_ and %)', async () => {
    const store = database.store(database.table('wildcards'));
    const id = randomUUID().slice(0, 8);
    const [under, percent, other] = [`a_${id}:`, `b%${id}:`, `aX${id}:`];
    for (const prefix of [under, percent, other, `b${id}:`, `${under}{nested}:`]) {
      await store.claim(`${prefix}{${randomUUID()}}`, claim('a'));
    }
    for (const prefix of [under, percent, other]) {
      expect(await keysOf(store, prefix, 'running')).toEqual([
        expect.stringMatching(new RegExp(`^${prefix.replace(/[%]/g, '%')}\\{[^{]+\\}$`)),
      ]);
      expect((await store.countRecords(prefix)).running).toBe(1);
    }
    await store.close();
  });

  it('reports an abandoned run once across three stores on their own connections', async () => {
    const table = database.table('abandon');
    const stores = [database.store(table), database.store(table), database.store(table)];
    const prefix = `abandon-${randomUUID().slice(0, 8)}:`;
    const k = `${prefix}{${randomUUID()}}`;
    await stores[0].claim(k, claim('a', 60_000, true));
    await stores[0].recordStep(k, 'a', step(0, 'order'), 60_000);
    await stores[0].release(k, 'a');
    const { since } = (await stores[1].list({ prefix, state: 'half_done', limit: 1 })).items[0];
    const answers = await Promise.all(
      [...stores, ...stores].map((store) => store.markAbandoned(k, since)),
    );
    expect(answers.filter(Boolean)).toEqual([true]);
    const [item] = (await stores[2].list({ prefix, state: 'half_done', limit: 1 })).items;
    expect(item.reported).toBe(true);
    for (const store of stores) await store.close();
  });
});

describe.each(databases)('$name store: a table without migration 003', (database) => {
  const logged: string[] = [];
  let error: jest.SpyInstance;

  beforeEach(() => {
    logged.length = 0;
    const capture = (message: unknown) => void logged.push(String(message));
    error = jest.spyOn(Logger.prototype, 'error').mockImplementation(capture);
  });
  afterEach(() => error.mockRestore());

  it('says to apply it (at boot and on use); ensureSchema adds it to a table in use', async () => {
    const table = database.table('no_listing');
    const read = (file: string) =>
      readFileSync(join(packageFolder('sql'), database.folder, file), 'utf8');
    for (const file of ['001_idempotency_records.sql', '002_idempotency_steps.sql']) {
      await database.query(read(file).replaceAll('idempotency_records', table));
    }
    const t = database.quote(table);
    const before = `listing:{${randomUUID()}}`;
    await database.query(
      `INSERT INTO ${t} (${database.quote('key')}, state, fingerprint, meta, body, completed_at, expires_at)
       VALUES ('${before}', 'c', 'fp', 'm', 'done', ${database.inSeconds(0)}, ${database.inSeconds(60)})`,
    );
    const migration = `sql/${database.folder}/003_idempotency_listing.sql`;

    const unmigrated = database.store(table, { ensureSchema: false });
    expect(await unmigrated.whenReady(5_000)).toBe(true);
    expect(logged.join('\n')).toContain(`the table "${table}" lacks the columns`);
    expect(logged.join('\n')).toContain(migration);
    await expect(unmigrated.claim(`listing:{${randomUUID()}}`, claim('a'))).rejects.toThrow(
      migration,
    );
    await expect(
      unmigrated.list({ prefix: 'listing:', state: 'completed', limit: 5 }),
    ).rejects.toThrow(migration);
    // Every claim needs the columns, a replay's too: nothing changed, the record waits.
    await expect(unmigrated.claim(before, claim('b'))).rejects.toThrow(migration);
    await unmigrated.close();

    const migrated = database.store(table);
    expect(await migrated.whenReady(5_000)).toBe(true);
    const fresh = `listing:{${randomUUID()}}`;
    expect(await migrated.claim(fresh, claim('c'))).toEqual({ status: 'claimed' });
    const completed = await migrated.list({ prefix: 'listing:', state: 'completed', limit: 5 });
    expect(completed.items).toEqual([expect.objectContaining({ key: before, meta: 'm' })]);
    expect(completed.items[0].about).toBeUndefined();
    const [running] = (await migrated.list({ prefix: 'listing:', state: 'running', limit: 5 }))
      .items;
    expect(running).toMatchObject({ key: fresh, about: claim('c').about });
    await migrated.close();
  });
});
