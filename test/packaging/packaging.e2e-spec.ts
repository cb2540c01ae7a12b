import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * The package as users get it: `npm pack` of a copy of the sources (so the shared dist/ is never
 * rebuilt under a running suite), then two scratch apps install the tarball next to their own
 * NestJS: a NestJS 11 CommonJS app (require) and a NestJS 12 ESM-only app (import). Each boots on
 * the memory store and on Redis and sends one POST twice. A tarball without lua/, a broken
 * exports map, a second @nestjs/core or an app loading both builds fails here.
 */

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
/** What `npm pack` needs to build and pack; node_modules is linked, not copied. */
const PACKAGE_SOURCES = [
  'package.json',
  'lib',
  'lua',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.build-esm.json',
  'compat/finish-esm-build.mjs',
  'README.md',
  'CHANGELOG.md',
  'LICENSE',
];
const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

interface ScratchApp {
  name: string;
  nest: string;
  type: 'commonjs' | 'module';
  /** Loads the packages the app body uses and sets RESOLVED to the file `nestjs-idempotency` maps to. */
  header: string;
  dir?: string;
}

// The same app in both module systems: decorators applied with Reflect.decorate, as tsc emits them.
const APP_BODY = `
let runs = 0;
class PaymentsController {
  create(body) {
    runs += 1;
    return { id: 'pay-' + runs, amount: body.amount };
  }
  runs() {
    return { runs };
  }
}
const method = (name, decorators) => Reflect.decorate(decorators, PaymentsController.prototype,
  name, Object.getOwnPropertyDescriptor(PaymentsController.prototype, name));
method('create', [Post('payments'), Idempotent(), (target, key) => Body()(target, key, 0)]);
method('runs', [Get('runs')]);
Reflect.decorate([Controller()], PaymentsController);
class AppModule {}
const store = process.env.REDIS_URL
  ? { redis: process.env.REDIS_URL, keyPrefix: process.env.KEY_PREFIX }
  : {};
Reflect.decorate(
  [Module({ imports: [IdempotencyModule.forRoot(store)], controllers: [PaymentsController] })],
  AppModule,
);
const app = await NestFactory.create(AppModule, { logger: ['error'] });
await app.listen(0, '127.0.0.1');
console.log('READY ' + app.getHttpServer().address().port + ' ' + RESOLVED);
`;

const APPS: ScratchApp[] = [
  {
    name: 'nest11-cjs',
    nest: installedVersion(join(ROOT, 'node_modules', '@nestjs', 'core', 'package.json')),
    type: 'commonjs',
    header: `require('reflect-metadata');
const { Body, Controller, Get, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, IdempotencyModule } = require('nestjs-idempotency');
const RESOLVED = require.resolve('nestjs-idempotency');`,
  },
  {
    name: 'nest12-esm',
    nest: lockedNest12Version(),
    type: 'module',
    header: `import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Idempotent, IdempotencyModule } from 'nestjs-idempotency';
const RESOLVED = fileURLToPath(import.meta.resolve('nestjs-idempotency'));`,
  },
];

function installedVersion(packageJson: string): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(packageJson) as { version: string }).version;
}

function lockedNest12Version(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const lock = require(join(ROOT, 'compat', 'nest12', 'package-lock.json')) as {
    packages: Record<string, { version: string }>;
  };
  return lock.packages['node_modules/@nestjs/core'].version;
}

/** The app body wrapped for its module system: CommonJS has no top-level await. */
function mainFile(app: ScratchApp): string {
  return app.type === 'module'
    ? `${app.header}\n${APP_BODY}`
    : `${app.header}\n(async () => {${APP_BODY}})().catch((e) => { console.error(e); process.exit(1); });\n`;
}

async function packTarball(work: string): Promise<string> {
  const source = join(work, 'source');
  for (const path of PACKAGE_SOURCES)
    await cp(join(ROOT, path), join(source, path), { recursive: true });
  await symlink(join(ROOT, 'node_modules'), join(source, 'node_modules'), 'dir');
  // prepack builds dist/ (both builds) inside the copy.
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: source,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  return join(work, packed.filename);
}

async function installApp(work: string, app: ScratchApp, tarball: string): Promise<string> {
  const dir = join(work, app.name);
  await mkdir(dir);
  const rootVersion = (name: string) =>
    installedVersion(join(ROOT, 'node_modules', name, 'package.json'));
  const packageJson = {
    name: `scratch-${app.name}`,
    private: true,
    type: app.type,
    dependencies: {
      '@nestjs/common': app.nest,
      '@nestjs/core': app.nest,
      '@nestjs/platform-express': app.nest,
      ioredis: rootVersion('ioredis'),
      'nestjs-idempotency': `file:${tarball}`,
      'reflect-metadata': rootVersion('reflect-metadata'),
      rxjs: rootVersion('rxjs'),
    },
  };
  await writeFile(join(dir, 'package.json'), JSON.stringify(packageJson, null, 2));
  await writeFile(join(dir, 'main.js'), mainFile(app));
  await run('npm', NPM_INSTALL, { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
  return dir;
}

interface Booted {
  url: string;
  resolved: string;
  child: ChildProcess;
}

/** Starts `node main.js` and waits for its READY line. */
function boot(dir: string, env: Record<string, string>): Promise<Booted> {
  const child = spawn(process.execPath, ['main.js'], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error('no READY line within 20 s')), 20_000);
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${dir}/main.js: ${error.message}\n${output}`));
    };
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const ready = /READY (\d+) (\S+)/.exec(output);
      if (ready) {
        clearTimeout(timer);
        resolve({ url: `http://127.0.0.1:${ready[1]}`, resolved: ready[2], child });
      }
    });
    child.on('exit', (code) => fail(new Error(`exited with ${code} before READY`)));
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

async function pay(url: string, key: string) {
  const response = await fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount: 100 }),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: await response.text(),
  };
}

describe('the packed package in scratch apps', () => {
  let work: string;
  let files: string[];
  const redisPrefix = uniquePrefix('packaging');
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'nestjs-idempotency-packaging-'));
    const tarball = await packTarball(work);
    const { stdout } = await run('tar', ['-tzf', tarball]);
    files = stdout.split('\n').filter(Boolean);
    await Promise.all(APPS.map(async (app) => (app.dir = await installApp(work, app, tarball))));
  }, 240_000);

  afterAll(async () => {
    await Promise.all(children.map(stop));
    const client = inspectionClient();
    await deleteKeysUnder(client, redisPrefix);
    client.disconnect();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('ships lua/, both builds and every file the exports map names', async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, string | Record<string, Record<string, string>>>;
    };
    const missing = Object.entries(manifest.exports).flatMap(([subpath, entry]) => {
      // A subpath whose sources do not exist yet (lib/swagger, lib/terminus while they are being
      // written) may point nowhere; as soon as lib/<name>/index.ts exists, its files must ship.
      if (subpath !== '.' && !existsSync(join(ROOT, 'lib', subpath, 'index.ts'))) return [];
      const targets =
        typeof entry === 'string' ? [entry] : Object.values(entry).flatMap(Object.values);
      return targets.filter((target) => !files.includes(`package/${target.slice(2)}`));
    });
    expect(missing).toEqual([]);
    expect(files).toEqual(
      expect.arrayContaining(['package/lua/claim-1.lua', 'package/dist/esm/package.json']),
    );
    expect(files.filter((file) => /\/(test|sample-app|compat|bench)\//.test(file))).toEqual([]);
  });

  describe.each(APPS)('$name', (app) => {
    it("installs one @nestjs/core, the app's own", async () => {
      const { stdout } = await run('npm', ['ls', '@nestjs/core', '--all', '--parseable'], {
        cwd: app.dir,
      });
      const copies = [...new Set(stdout.split('\n').filter(Boolean))];
      expect(copies).toEqual([join(app.dir!, 'node_modules', '@nestjs', 'core')]);
    });

    it('type-checks against the types of the build it loads', async () => {
      // Old-style node10 resolution for the CommonJS app (the NestJS 11 CLI default), nodenext for
      // the ESM app; the checker is the repository's TypeScript.
      const options =
        app.type === 'module'
          ? ['--module', 'nodenext', '--moduleResolution', 'nodenext']
          : ['--module', 'commonjs', '--moduleResolution', 'node10'];
      await writeFile(
        join(app.dir!, 'consumer.ts'),
        `import { IdempotencyModule, Idempotent, MemoryIdempotencyStore } from 'nestjs-idempotency';
import { runIdempotencyStoreContract } from 'nestjs-idempotency/testing';
export const used = [IdempotencyModule.forRoot({ store: new MemoryIdempotencyStore() }), Idempotent(), runIdempotencyStoreContract];
`,
      );
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      const args = [tsc, '--noEmit', '--strict', '--skipLibCheck', '--types', 'node', ...options];
      await run(
        process.execPath,
        [...args, '--typeRoots', join(ROOT, 'node_modules', '@types'), 'consumer.ts'],
        {
          cwd: app.dir,
        },
      ).catch((error: { stdout?: string }) => {
        throw new Error(`tsc in ${app.name}:\n${error.stdout ?? String(error)}`);
      });
    });

    it.each(['memory', 'redis'])('replays the second POST on the %s store', async (store) => {
      const env: Record<string, string> =
        store === 'redis' ? { REDIS_URL: testRedisUrl(), KEY_PREFIX: redisPrefix } : {};
      const booted = await boot(app.dir!, env);
      children.push(booted.child);
      // Only one of the two builds is loaded: the one for the app's module system.
      const build = app.type === 'module' ? 'dist/esm/index.js' : 'dist/index.js';
      expect(booted.resolved).toBe(join(app.dir!, 'node_modules', 'nestjs-idempotency', build));

      const key = `${app.name}-${store}-${Date.now()}`;
      const first = await pay(booted.url, key);
      const second = await pay(booted.url, key);
      const runs = await (await fetch(`${booted.url}/runs`)).json();

      expect(first).toEqual({ status: 201, replayed: null, body: first.body });
      expect(JSON.parse(first.body)).toEqual({ id: 'pay-1', amount: 100 });
      expect(second).toEqual({ status: 201, replayed: 'true', body: first.body });
      expect(runs).toEqual({ runs: 1 });
      await stop(booted.child);
    });
  });
});
