import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, IdempotencyService, MemoryIdempotencyStore } from '../../lib';
import { deferred } from '../support/test-app';

/**
 * Steps started together, as docs/steps.md tells a handler to start them
 * (`Promise.all([step('a', ...), step('b', ...)])`), when one of them fails while another is
 * still running. `Promise.all` rejects at the first failure, so the handler returns (throws)
 * with its sibling step still in flight. That step's effect happens all the same: it must either
 * be recorded, so that the retry does not do it again, or the retry must at least not run it
 * while the first run's copy is still running.
 */
describe('resumable steps started together, one of which fails', () => {
  const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
  let app: INestApplicationContext;
  let service: IdempotencyService;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot({ store })] })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    service = app.get(IdempotencyService);
  });
  afterAll(async () => {
    await app?.close();
    await store.close();
  });

  /**
   * A handler of two steps started together: `check` (throws on its first call only) and `email`
   * (an effect nothing deduplicates), which waits for the gate before it sends.
   */
  function handler() {
    const sent: number[] = [];
    const checkFailed = deferred();
    const gate = deferred();
    let running = 0;
    let overlapped = false;
    let failures = 1;
    let emailStep: Promise<unknown> = Promise.resolve();
    const fn = async () => {
      const email = service.step('email', async () => {
        running++;
        if (running > 1) overlapped = true;
        await gate.promise;
        sent.push(sent.length + 1);
        running--;
        return sent.length;
      });
      emailStep = email.catch(() => undefined);
      const check = service.step('check', async () => {
        if (failures-- > 0) {
          checkFailed.resolve();
          throw new Error('card check failed');
        }
        return 'ok';
      });
      const [sentCount] = await Promise.all([email, check]);
      return sentCount;
    };
    return {
      fn,
      sent,
      checkFailed: checkFailed.promise,
      overlapped: () => overlapped,
      open: () => gate.resolve(),
      /** The first run's e-mail step, recorded or refused. */
      emailSettled: () => emailStep,
    };
  }

  /**
   * The outcome of a run whose `email` step is held. A run that waits for its steps in flight
   * before it gives its claim up would never settle while the gate is shut: after a deadline
   * (the absence of an event cannot be awaited), the gate opens so that it can.
   */
  async function outcome(run: Promise<unknown>, open: () => void): Promise<unknown> {
    const settled = run.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    const held = await Promise.race([
      settled.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 300)),
    ]);
    if (held) open();
    return settled;
  }

  it('records (or waits for) a sibling step that completes after another one failed: the retry does not send the e-mail again', async () => {
    const key = randomUUID();
    const h = handler();
    const first = service.run(key, h.fn, { resumable: true });
    await h.checkFailed;
    expect(await outcome(first, h.open)).toEqual({ error: new Error('card check failed') });
    // The e-mail goes out after the run failed (if it did not wait for it): its effect happened.
    h.open();
    await h.emailSettled();
    expect(h.sent).toEqual([1]);
    // The client retries: `check` passes now, and `email` must come back from its record.
    await expect(service.run(key, h.fn, { resumable: true })).resolves.toBe(1);
    expect(h.sent).toEqual([1]);
  });

  it('does not let a retry run a step while the failed run is still running it', async () => {
    const key = randomUUID();
    const h = handler();
    const first = service.run(key, h.fn, { resumable: true });
    await h.checkFailed;
    // The client retries as soon as it sees the failure, while `email` of the first run may
    // still be held.
    expect(await outcome(first, h.open)).toEqual({ error: new Error('card check failed') });
    const retry = service.run(key, h.fn, { resumable: true });
    expect(await outcome(retry, h.open)).toEqual({ value: 1 });
    expect(h.overlapped()).toBe(false);
    expect(h.sent).toEqual([1]);
  });
});
