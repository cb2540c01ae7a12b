import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { cp, mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Pool } from 'pg';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';

/**
 * `transactional: true` on NestJS 12, outside Jest's VM (which cannot load the CommonJS
 * @nestjs-cls/transactional requiring the ESM-only @nestjs/common 12: jest.nest12.config.cjs
 * leaves the transactional suites out). A scratch app (fixtures/nest12-transactional-app.mjs) runs
 * in its own Node process on compat/nest12's NestJS 12 and the library's ESM build, with
 * nestjs-cls, @nestjs-cls/transactional and its TypeORM adapter copied next to NestJS 12, as an
 * app's install has them: they require @nestjs/common 12 through Node's require(esm).
 */
const ROOT = join(__dirname, '..', '..');
const NEST12 = join(ROOT, 'compat', 'nest12', 'node_modules');
/** From compat/nest12: NestJS 12 and what its apps share with it. */
const FROM_NEST12 = [
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/platform-express',
  'reflect-metadata',
  'rxjs',
];
/** From the root, linked: they never load NestJS. */
const FROM_ROOT = ['pg', 'typeorm'];
/** From the root, copied: they require @nestjs/common, which must resolve to NestJS 12. */
const COPIED = [
  'nestjs-cls',
  '@nestjs-cls/transactional',
  '@nestjs-cls/transactional-adapter-typeorm',
];

/** A scratch folder whose node_modules has the app's packages and the library's ESM build. */
async function scratchApp(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'idempotency-nest12-tx-'));
  const modules = join(dir, 'node_modules');
  const place = async (name: string, from: string, copy: boolean) => {
    await mkdir(dirname(join(modules, name)), { recursive: true });
    if (copy) await cp(join(from, name), join(modules, name), { recursive: true });
    else await symlink(join(from, name), join(modules, name), 'dir');
  };
  for (const name of FROM_NEST12) await place(name, NEST12, false);
  for (const name of FROM_ROOT) await place(name, join(ROOT, 'node_modules'), false);
  for (const name of COPIED) await place(name, join(ROOT, 'node_modules'), true);
  const library = join(modules, 'nestjs-idempotency');
  const esm = join(library, 'dist', 'esm');
  execFileSync(
    process.execPath,
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      'tsconfig.build-esm.json',
      '--outDir',
      esm,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  execFileSync(process.execPath, [join(ROOT, 'compat', 'finish-esm-build.mjs'), esm], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  for (const path of ['package.json', 'lua', 'sql']) {
    await cp(join(ROOT, path), join(library, path), { recursive: true });
  }
  await cp(join(__dirname, 'fixtures', 'nest12-transactional-app.mjs'), join(dir, 'main.mjs'));
  return dir;
}

describe('transactional completion on NestJS 12 (ESM app, its own process)', () => {
  const payments = uniqueTable('nest12_tx_payments');
  const records = uniqueTable('nest12_tx_records');
  let dir: string;
  let pool: Pool;
  let child: ChildProcess | undefined;
  let url: string;
  let versions: { app: string; cls: string };

  beforeAll(async () => {
    pool = await testPool();
    await pool.query(`CREATE TABLE "${payments}" (id serial PRIMARY KEY, key text)`);
    dir = await scratchApp();
    child = spawn(process.execPath, [join(dir, 'main.mjs')], {
      cwd: dir,
      env: { ...process.env, DATABASE_URL: testPostgresUrl(), TABLE: payments, RECORDS: records },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    const ready = await Promise.race([
      new Promise<string>((resolve) =>
        lines.on('line', (line) => line.startsWith('READY ') && resolve(line.slice(6))),
      ),
      once(child, 'exit').then(([code]) => {
        throw new Error(`the NestJS 12 app exited with ${code} before it was ready`);
      }),
    ]);
    const parsed = JSON.parse(ready) as { port: number; versions: typeof versions };
    url = `http://127.0.0.1:${parsed.port}`;
    versions = parsed.versions;
  }, 180_000);
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    await dropTable(pool, payments);
    await dropTable(pool, records);
    await pool.end();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const rows = async (key: string) =>
    Number(
      (await pool.query(`SELECT count(*) FROM "${payments}" WHERE key = $1`, [key])).rows[0].count,
    );
  const pay = (key: string, fail = false) =>
    fetch(`${url}/payments`, {
      method: 'POST',
      headers: { 'idempotency-key': key, ...(fail && { 'x-fail': '1' }) },
    });

  it('runs NestJS 12, in the app and in the CommonJS nestjs-cls', () => {
    expect(versions.app).toMatch(/^12\./);
    expect(versions.cls).toMatch(/^12\./);
  });

  it('commits the payment and the record together; a retry replays it', async () => {
    const key = randomUUID();
    const first = await pay(key);
    expect(first.status).toBe(201);
    const body = await first.text();
    const retry = await pay(key);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(body);
    expect(await rows(key)).toBe(1);
  });

  it('rolls the payment back when the handler fails, and a retry runs once', async () => {
    const key = randomUUID();
    expect((await pay(key, true)).status).toBe(402);
    expect(await rows(key)).toBe(0);
    expect((await pay(key)).status).toBe(201);
    expect(await rows(key)).toBe(1);
  });
});
