import { Queue, QueueEvents } from 'bullmq';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { AppProcess, buildLibrary } from './app-process';

/**
 * docs/jobs.md's BullMQ recipe under crashes: two worker processes (fixtures/bullmq-worker-
 * process.js) run a queue's jobs through `IdempotencyService.run(job.id, ...)`, each job's effect
 * a row in PostgreSQL. A producer adds the jobs (some added twice under the same custom id, some
 * added again after they completed, some failing on their first attempt), and both workers are
 * SIGKILLed mid-stream and replaced: BullMQ moves their jobs back as stalled. No job may be lost,
 * and no job's effect may run twice, except with the Redis store for a job whose worker died
 * between its effect and the record's completion (the crash window docs/jobs.md describes);
 * with the PostgreSQL transactional store, never. Rows are counted in the database.
 * RELIABILITY_FULL=1 runs more jobs.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const JOBS = FULL ? 600 : 60;
/** BullMQ's lockDuration and the lease, in ms: short, so stalled jobs come back quickly. */
const LOCK_MS = 1_000;
/** A job waits a random 0 to HOLD_MS ms between its effect and its completion. */
const HOLD_MS = 100;

beforeAll(buildLibrary, 120_000);

describe.each(['postgres', 'redis'] as const)('BullMQ jobs exactly once (%s store)', (store) => {
  const prefix = uniquePrefix(`bullmq-${store}`);
  const bullPrefix = `${prefix}bull`;
  const queueName = `jobs-${randomUUID().slice(0, 8)}`;
  const effects = uniqueTable('bull_effects');
  const records = uniqueTable('bull_records');
  const workers: AppProcess[] = [];
  let pool: Pool;
  let redis: Redis;
  let queue: Queue;
  let queueEvents: QueueEvents;

  beforeAll(async () => {
    pool = await testPool();
    redis = inspectionClient();
    await redis.ping().catch((error: Error) => {
      throw new Error(`this test needs Redis at ${testRedisUrl()}: ${error.message}`);
    });
    await pool.query(
      `CREATE TABLE "${effects}" (id serial PRIMARY KEY, job_id text NOT NULL, pid int NOT NULL)`,
    );
    const url = new URL(testRedisUrl());
    const connection = { host: url.hostname, port: Number(url.port || 6379) };
    queue = new Queue(queueName, { connection, prefix: bullPrefix });
    queueEvents = new QueueEvents(queueName, { connection, prefix: bullPrefix });
    await queueEvents.waitUntilReady();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop('SIGKILL')));
    await queueEvents?.close();
    await queue?.close();
    if (pool) {
      await dropTable(pool, effects);
      await dropTable(pool, records);
      await pool.end();
    }
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  const startWorker = () =>
    AppProcess.start(
      {
        STORE: store,
        QUEUE: queueName,
        BULL_PREFIX: bullPrefix,
        REDIS_URL: testRedisUrl(),
        KEY_PREFIX: prefix,
        POSTGRES_URL: testPostgresUrl(),
        EFFECTS_TABLE: effects,
        RECORDS_TABLE: records,
        LOCK_MS: String(LOCK_MS),
        HOLD_MS: String(HOLD_MS),
      },
      'bullmq-worker-process.js',
    ).then((worker) => {
      workers.push(worker);
      return worker;
    });

  it('loses no job and runs each effect once across two SIGKILLed workers', async () => {
    const ids = Array.from({ length: JOBS }, (_, i) => `job-${i}`);
    const failOnce = new Set(ids.filter((_, i) => i % 9 === 4));
    /** Added again once completed (a producer re-sending): run() must replay them. */
    const readded = new Set(ids.filter((_, i) => i % 7 === 2));
    const expected = new Map(ids.map((id) => [id, readded.has(id) ? 2 : 1]));
    const completions = new Map<string, number>();
    let completed = 0;
    /** Resolved when `completed` reaches a count. */
    const milestones: { at: number; resolve: () => void }[] = [];
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    const add = (id: string) =>
      queue.add(
        'effect',
        { failOnce: failOnce.has(id) },
        { jobId: id, attempts: 3, removeOnComplete: true, removeOnFail: false },
      );
    queueEvents.on('completed', ({ jobId }) => {
      const count = (completions.get(jobId) ?? 0) + 1;
      completions.set(jobId, count);
      completed++;
      for (const milestone of milestones.filter((m) => completed >= m.at)) milestone.resolve();
      if (count === 1 && readded.has(jobId)) void add(jobId);
      if (ids.every((id) => (completions.get(id) ?? 0) >= expected.get(id)!)) allDone();
    });

    const first = await Promise.all([startWorker(), startWorker()]);
    for (const [i, id] of ids.entries()) {
      await add(id);
      if (i % 5 === 0) await add(id); // the same custom id twice while it exists: BullMQ's own dedup
    }

    // Kill each of the two first workers once the stream is under way (a quarter, then half of
    // the jobs completed), with jobs in flight on it.
    const killed: number[] = [];
    const replacements: Promise<AppProcess>[] = [];
    for (const [n, victim] of first.entries()) {
      const at = Math.floor((JOBS * (n + 1)) / 4);
      if (completed < at) await new Promise<void>((resolve) => milestones.push({ at, resolve }));
      killed.push(victim.pid);
      await victim.stop('SIGKILL');
      // Its replacement boots while the other worker goes on: the next kill lands mid-stream too.
      replacements.push(startWorker());
    }
    await Promise.all(replacements);

    // A clear failure, with what is missing, rather than Jest's timeout.
    let stuck: NodeJS.Timeout | undefined;
    await Promise.race([
      done,
      new Promise((_, reject) => {
        stuck = setTimeout(() => {
          const missing = ids.filter((id) => (completions.get(id) ?? 0) < expected.get(id)!);
          reject(new Error(`not completed after 80 s: ${missing.join(' ')}`));
        }, 80_000);
      }),
    ]).finally(() => clearTimeout(stuck));
    const counts = await queue.getJobCounts('failed', 'waiting', 'active', 'delayed');
    const rows = await pool.query<{ job_id: string; pid: number }>(
      `SELECT job_id, pid FROM "${effects}" ORDER BY id`,
    );
    const byJob = new Map<string, number[]>();
    for (const { job_id, pid } of rows.rows) byJob.set(job_id, [...(byJob.get(job_id) ?? []), pid]);

    const lost = ids.filter((id) => !byJob.has(id));
    const twice = [...byJob].filter(([, pids]) => pids.length > 1);
    // A second run is only allowed after a first one on a worker that was killed.
    const unexplained = twice.filter(([, pids]) => !killed.includes(pids[0]));
    const effectsOnKilled = workers
      .filter((w) => killed.includes(w.pid))
      .reduce((sum, w) => sum + w.reports('EFFECT').length, 0);
    const events = (type: string) => workers.reduce((sum, w) => sum + w.events(type).length, 0);
    const stats = {
      store,
      jobs: JOBS,
      readded: readded.size,
      failOnce: failOnce.size,
      killed: killed.length,
      effectsStartedOnKilledWorkers: effectsOnKilled,
      replayed: events('replayed'),
      effectRows: rows.rows.length,
      ranTwice: twice.length,
      lost: lost.length,
    };
    console.log(`BullMQ crash test: ${JSON.stringify(stats)}`);

    expect(lost).toEqual([]);
    expect(counts).toEqual({ failed: 0, waiting: 0, active: 0, delayed: 0 });
    expect(unexplained).toEqual([]);
    if (store === 'postgres') expect(twice).toEqual([]);
    expect(stats.replayed).toBeGreaterThanOrEqual(readded.size);
  }, 120_000);
});
