import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findFreePort } from './redis-server';

/** A redis-server in sentinel mode, watching one master as `mymaster`. */
export interface SentinelProcess {
  port: number;
  stop(): Promise<void>;
}

/**
 * Starts a sentinel for the master at `masterPort` (quorum 1: enough for a client to find the
 * master, which is all a store needs of it). It needs a config file of its own, which it
 * rewrites; resolves once it logs that it monitors the master.
 */
export async function startSentinel(masterPort: number): Promise<SentinelProcess> {
  const port = await findFreePort();
  const dir = mkdtempSync(join(tmpdir(), 'sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn('redis-server', [conf, '--sentinel'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let log = '';
    child.stdout!.on('data', (chunk) => {
      log += chunk;
      if (log.includes('+monitor master mymaster')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`sentinel exited with ${code}: ${log}`)));
  });
  child.stdout!.resume();
  return {
    port,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
