import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { testRedisUrl } from '../support/redis';
import { buildLibrary } from './app-process';

/**
 * `@Idempotent()` on a BullMQ processor's `process()` and on a `@Cron` method: their frameworks
 * call the method directly, so no interceptor ever runs and the app is refused at boot, naming
 * the method and what to use instead. In a process of its own (fixtures/unintercepted-
 * process.js): @nestjs/bullmq and @nestjs/schedule 12 are ESM only, which Jest's VM cannot
 * load. The rule itself: test/e2e/unintercepted-methods.e2e-spec.ts; on an @SqsMessageHandler:
 * test/e2e/sqs-consumers.e2e-spec.ts.
 */
beforeAll(buildLibrary, 120_000);

async function boot(which: 'bullmq' | 'cron'): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(__dirname, 'fixtures', 'unintercepted-process.js')],
    { env: { ...process.env, CASE: which, REDIS_URL: testRedisUrl() }, timeout: 30_000 },
  );
  const line = stdout.split('\n').find((l) => l.startsWith('REFUSED ') || l === 'BOOTED')!;
  return line === 'BOOTED' ? line : (JSON.parse(line.slice('REFUSED '.length)) as string);
}

describe('@Idempotent() on methods their framework calls directly', () => {
  it('is refused on a BullMQ processor, naming it and what to use instead', async () => {
    expect(await boot('bullmq')).toMatch(
      /^IdempotencyModule: @Idempotent\(\) on InvoicesProcessor\.process does nothing: it is a method of a provider[\s\S]*Use @IdempotentMethod\(\{ key \}\) on the method or IdempotencyService\.run\(\) inside it/,
    );
  });

  it('is refused on a @Cron method', async () => {
    expect(await boot('cron')).toMatch(/@Idempotent\(\) on NightlyReport\.build does nothing/);
  });
});
