import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = join(__dirname, '..', '..');

/** What dist/ is built from: lib/'s files, the tsconfigs and the compiler's version. */
function sourcesHash(): string {
  const hash = createHash('sha256');
  const files = readdirSync(join(ROOT, 'lib'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  for (const file of [
    ...files,
    join(ROOT, 'tsconfig.json'),
    join(ROOT, 'tsconfig.build.json'),
    join(ROOT, 'node_modules/typescript/package.json'),
  ]) {
    hash.update(file).update(readFileSync(file));
  }
  return hash.digest('hex');
}

/** Written into dist/ after a build: the {@link sourcesHash} it was built from. */
const STAMP = join(ROOT, 'dist', '.reliability-build');

/**
 * Builds dist/ (the child processes use the library as published), unless it was built from the
 * same sources already: every reliability file calls this, and a build takes tens of seconds.
 * `npm run build` empties dist/ first, so a build of other sources never passes for this one.
 */
export function buildLibrary(): void {
  const sources = sourcesHash();
  let built: string | undefined;
  try {
    built = readFileSync(STAMP, 'utf8');
  } catch {
    built = undefined;
  }
  if (built === sources) return;
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  writeFileSync(STAMP, sources);
}

/** One app in its own process (test/reliability/fixtures/app-process.js). */
export class AppProcess {
  readonly lines: string[] = [];
  private waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  url = '';

  private readonly output: ReturnType<typeof createInterface>;

  private constructor(readonly child: ChildProcess) {
    this.output = createInterface({ input: child.stdout! });
    this.output.on('line', (line) => {
      this.lines.push(line);
      for (const waiter of [...this.waiters]) {
        if (!waiter.pattern.test(line)) continue;
        this.waiters = this.waiters.filter((w) => w !== waiter);
        waiter.resolve(line);
      }
    });
  }

  /** Starts a fixture (by default the HTTP app) and resolves once it prints `READY`. */
  static async start(env: Record<string, string>, fixture = 'app-process.js'): Promise<AppProcess> {
    const child = spawn(process.execPath, [join(__dirname, 'fixtures', fixture)], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const app = new AppProcess(child);
    const ready = await Promise.race([
      app.waitForLine(/^READY( \d+)?$/),
      once(child, 'exit').then(([code]) => {
        throw new Error(`app process exited with ${code} before it was ready`);
      }),
    ]);
    const port = ready.split(' ')[1];
    if (port) app.url = `http://127.0.0.1:${port}`;
    return app;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves with the next line (or an earlier one) matching `pattern`. */
  waitForLine(pattern: RegExp): Promise<string> {
    const seen = this.lines.find((line) => pattern.test(line));
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ pattern, resolve }));
  }

  /** Resolves once the process printed `count` reports of `word` (checked at each line). */
  waitForReports(word: string, count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.reports(word).length < count) return;
        this.output.off('line', check);
        resolve();
      };
      this.output.on('line', check);
      check();
    });
  }

  /** Lines starting with `word ` (the fixture's reports), their rest. */
  reports(word: string): string[] {
    return this.lines
      .filter((line) => line.startsWith(`${word} `))
      .map((line) => line.slice(word.length + 1));
  }

  events(type: string): string[] {
    return this.lines.filter(
      (line) => line.startsWith('EVENT ') && line.includes(`"type":"${type}"`),
    );
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGCONT');
    this.child.kill(signal);
    await exited;
  }
}
