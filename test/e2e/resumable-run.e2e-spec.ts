import { Controller, INestApplicationContext, Injectable, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  derivedIdempotencyKey,
  IdempotencyEvent,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyRecordUnreadableError,
  IdempotencyService,
  IdempotencyStepMismatchError,
  IdempotencyStoreUnavailableError,
  Idempotent,
  IdempotentMethod,
  MemoryIdempotencyStore,
  StoredStep,
} from '../../lib';
import { CountingStore } from '../support/resumable';
import { deferred } from '../support/test-app';
import { WrappedStore } from '../support/wrapped-store';

const SECRET = 'resumable-run-e2e-secret-0123456789abcdef';

/** A provider whose method resumes: one step per call of `record`. */
@Injectable()
class Shipments {
  readonly ran: string[] = [];
  failAfterLabel = false;

  constructor(readonly idempotency: IdempotencyService) {}

  @IdempotentMethod({ key: (orderId: string) => orderId, resumable: true })
  async ship(orderId: string): Promise<{ label: string; pickup: Date }> {
    const label = await this.idempotency.step('label', async () => {
      this.ran.push('label');
      return `label-${orderId}-${this.ran.length}`;
    });
    if (this.failAfterLabel) {
      this.failAfterLabel = false;
      throw new Error('carrier down');
    }
    const pickup = await this.idempotency.step('pickup', async () => {
      this.ran.push('pickup');
      return new Date(Date.UTC(2026, 10, 27));
    });
    return { label, pickup };
  }
}

/** A store whose recordStep fails while `failing` is set (a store outage mid-run). */
class FlakyStore extends CountingStore {
  failing = false;

  override recordStep(key: string, token: string, step: StoredStep, ttlMs: number) {
    if (this.failing) return Promise.reject(new Error('connection reset'));
    return super.recordStep(key, token, step, ttlMs);
  }
}

async function boot(options: IdempotencyModuleOptions): Promise<INestApplicationContext> {
  @Module({ imports: [IdempotencyModule.forRoot(options)], providers: [Shipments] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  await app.init();
  return app;
}

describe('IdempotencyService.run() with resumable: true', () => {
  const store = new FlakyStore({ sweepIntervalMs: 0 });
  const events: IdempotencyEvent[] = [];
  let app: INestApplicationContext;
  let service: IdempotencyService;

  beforeAll(async () => {
    app = await boot({
      store,
      keyDerivationSecret: SECRET,
      onEvent: (event) => events.push(event),
    });
    service = app.get(IdempotencyService);
  });
  afterAll(async () => {
    await app?.close();
    await store.close();
  });

  const resumable = { resumable: true };

  it('resumes after fn threw: recorded steps return their results, Date, bigint, Buffer, Map, Set and undefined included', async () => {
    const key = randomUUID();
    const ran: string[] = [];
    let fail = true;
    const value = {
      at: new Date('2026-11-26T10:00:00Z'),
      cents: 2n ** 70n,
      pdf: Buffer.from('%PDF'),
      tags: new Set(['a']),
      byId: new Map([[1, 'one']]),
      none: undefined,
    };
    const fn = async () => {
      const first = await service.step('first', async () => {
        ran.push('first');
        return value;
      });
      const second = await service.step('second', async () => {
        ran.push('second');
        return undefined;
      });
      if (fail) {
        fail = false;
        throw new Error('after two steps');
      }
      const third = await service.step('third', () => ran.push('third'));
      return { first, second, third };
    };
    await expect(service.run(key, fn, resumable)).rejects.toThrow('after two steps');
    const result = await service.run(key, fn, resumable);
    expect(ran).toEqual(['first', 'second', 'third']);
    expect(result).toEqual({ first: value, second: undefined, third: 3 });
    expect(result.first.at).toBeInstanceOf(Date);
    expect(result.first.byId).toBeInstanceOf(Map);
    expect(await service.run(key, fn, resumable)).toEqual(result);
    expect(ran).toHaveLength(3);
  });

  it('numbers steps in the order step() is called: steps started together resume in place', async () => {
    const key = randomUUID();
    const ran: string[] = [];
    let fail = true;
    const fn = async () => {
      const slow = deferred();
      const both = Promise.all([
        service.step('slow', async () => {
          await slow.promise;
          ran.push('slow');
          return 'a';
        }),
        service.step('fast', async () => {
          ran.push('fast');
          return 'b';
        }),
      ]);
      setImmediate(slow.resolve); // the second step is recorded first
      const [a, b] = await both;
      if (fail) {
        fail = false;
        throw new Error('after both');
      }
      return `${a}${b}`;
    };
    await expect(service.run(key, fn, resumable)).rejects.toThrow('after both');
    await expect(service.run(key, fn, resumable)).resolves.toBe('ab');
    expect(ran).toEqual(['fast', 'slow']);
  });

  it('reports each step recorded and each step returned from its record', async () => {
    const key = randomUUID();
    const since = events.length;
    let fail = true;
    const fn = async () => {
      await service.step('one', () => 1);
      if (fail) {
        fail = false;
        throw new Error('between');
      }
      await service.step('two', () => 2);
    };
    await service.run(key, fn, resumable).catch(() => undefined);
    await service.run(key, fn, resumable);
    expect(
      events
        .slice(since)
        .map((event) => event.type)
        .filter((type) => type.startsWith('step_')),
    ).toEqual(['step_recorded', 'step_replayed', 'step_recorded']);
  });

  it('fails with IdempotencyStepMismatchError, naming both steps, when a step changed name; never stored', async () => {
    const key = randomUUID();
    const ran: string[] = [];
    const steps =
      (names: string[], fail = false) =>
      async () => {
        for (const name of names) await service.step(name, () => ran.push(name));
        if (fail) throw new Error('stop');
        return names;
      };
    // A predicate that matches every error: still, a mismatch is never the outcome.
    const options = { ...resumable, storeErrors: [() => true] };
    await expect(service.run(key, steps(['a', 'b'], true), { ...resumable })).rejects.toThrow();
    const mismatch = await service.run(key, steps(['a', 'c']), options).catch((e: unknown) => e);
    expect(mismatch).toBeInstanceOf(IdempotencyStepMismatchError);
    expect(mismatch).toMatchObject({ index: 1, recorded: 'b', called: 'c' });
    expect((mismatch as Error).message).toMatch(/step 1 was recorded as "b".*calls it "c"/s);
    expect(ran).toEqual(['a', 'b']);
    // The old code resumes where it stopped.
    await expect(service.run(key, steps(['a', 'b']), options)).resolves.toEqual(['a', 'b']);
    expect(ran).toEqual(['a', 'b']);
  });

  it('fails a run with IdempotencyStoreUnavailableError when a step cannot be recorded; the retry runs it again', async () => {
    const key = randomUUID();
    let runs = 0;
    const fn = () => service.step('charge', () => ++runs);
    store.failing = true;
    try {
      await expect(service.run(key, fn, resumable)).rejects.toBeInstanceOf(
        IdempotencyStoreUnavailableError,
      );
    } finally {
      store.failing = false;
    }
    await expect(service.run(key, fn, resumable)).resolves.toBe(2);
  });

  it('fails a step whose result cannot be stored, after it ran; the retry runs it again', async () => {
    const key = randomUUID();
    let runs = 0;
    const fn = () => service.step('stream', () => (++runs === 1 ? Readable.from(['x']) : 'text'));
    await expect(service.run(key, fn, resumable)).rejects.toThrow(
      /step 0 \(stream\) ran, but its result cannot be recorded: it is a stream/,
    );
    await expect(service.run(key, fn, resumable)).resolves.toBe('text');
    expect(runs).toBe(2);
  });

  it('never stores a step that cannot be recorded as the outcome, whatever storeErrors match', async () => {
    const key = randomUUID();
    let runs = 0;
    const fn = () => service.step('stream', () => (++runs === 1 ? Readable.from(['x']) : 'text'));
    const options = { resumable: true, storeErrors: [Error] };
    await expect(service.run(key, fn, options)).rejects.toThrow(/cannot be recorded/);
    await expect(service.run(key, fn, options)).resolves.toBe('text');
    expect(runs).toBe(2);
  });

  it('refuses step() outside a claim, in a run that is not resumable, inside a step, and with a bad name or option', async () => {
    await expect(service.step('lonely', () => 1)).rejects.toThrow(/this code runs in neither/);
    await expect(service.run(randomUUID(), () => service.step('x', () => 1))).rejects.toThrow(
      /not resumable; set `resumable: true`/,
    );
    const nested = () => service.step('outer', () => service.step('inner', () => 1));
    await expect(service.run(randomUUID(), nested, resumable)).rejects.toThrow(
      /step\("inner"\) was called inside step "outer": steps do not nest/,
    );
    const bad = (call: () => Promise<unknown>) => service.run(randomUUID(), call, resumable);
    await expect(bad(() => service.step('', () => 1))).rejects.toThrow(TypeError);
    await expect(bad(() => service.step('x'.repeat(201), () => 1))).rejects.toThrow(/1 to 200/);
    await expect(
      bad(() => service.step('x', () => 1, { transactionl: true } as never)),
    ).rejects.toThrow(/unknown option `transactionl` \(did you mean `transactional`\?\)/);
    await expect(bad(() => service.step('x', () => 1, { ttl: 5 } as never))).rejects.toThrow(
      /`ttl` is not taken here/,
    );
  });

  it('derives keys inside a step from the step: the same when the step runs again, another in another step', async () => {
    const key = randomUUID();
    const keys: string[] = [];
    let fail = true;
    const fn = async () => {
      await service.step('one', () => keys.push(derivedIdempotencyKey('call')));
      await service.step('two', () => {
        keys.push(derivedIdempotencyKey('call'));
        if (fail) throw new Error('in step two');
      });
      keys.push(derivedIdempotencyKey('call'));
    };
    fail = true;
    await expect(service.run(key, fn, resumable)).rejects.toThrow('in step two');
    fail = false;
    await service.run(key, fn, resumable);
    const [one, two, twoAgain, outside] = keys;
    expect(keys).toHaveLength(4);
    expect(twoAgain).toBe(two);
    expect(new Set([one, two, outside]).size).toBe(3);
  });

  it('@IdempotentMethod({ resumable: true }) resumes a provider method', async () => {
    const shipments = app.get(Shipments);
    const orderId = randomUUID();
    shipments.failAfterLabel = true;
    await expect(shipments.ship(orderId)).rejects.toThrow('carrier down');
    const shipped = await shipments.ship(orderId);
    expect(shipped).toEqual({
      label: `label-${orderId}-1`,
      pickup: new Date(Date.UTC(2026, 10, 27)),
    });
    expect(shipments.ran).toEqual(['label', 'pickup']);
  });
});

describe('recorded steps with encryption', () => {
  it('seals step results, bound to the record and the step: one moved to another step does not open', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const events: IdempotencyEvent[] = [];
    const app = await boot({
      store,
      encryption: { keys: ['resumable-run-e2e-encryption-key-0123456789'] },
      onEvent: (event) => events.push(event),
    });
    try {
      const service = app.get(IdempotencyService);
      const key = randomUUID();
      let fail = true;
      const fn = async () => {
        await service.step('first', () => 'card 4242 4242 4242 4242');
        await service.step('second', () => 'second secret');
        if (fail) throw new Error('stop');
        return 'done';
      };
      await expect(service.run(key, fn, { resumable: true })).rejects.toThrow('stop');
      const recordKey = events.find((event) => event.type === 'claimed')!.key!;
      const claim = await store.claim(recordKey, {
        token: 'operator',
        fingerprint: '',
        leaseMs: 60_000,
        resumable: true,
      });
      const steps = claim.status === 'claimed' ? claim.steps! : [];
      expect(steps).toHaveLength(2);
      for (const step of steps) {
        expect(step.result.body.toString('latin1')).not.toMatch(/secret|4242/);
      }
      // The first step's sealed result, put in the second's place.
      const first = steps.find((step) => step.index === 0)!;
      await store.recordStep(recordKey, 'operator', { ...first, index: 1, name: 'second' }, 60_000);
      await store.release(recordKey, 'operator');
      fail = false;
      await expect(service.run(key, fn, { resumable: true })).rejects.toBeInstanceOf(
        IdempotencyRecordUnreadableError,
      );
    } finally {
      await app.close();
      await store.close();
    }
  });
});

describe('resumable on a store that cannot record steps', () => {
  it('refuses run() before fn runs', async () => {
    const store = new WrappedStore(new MemoryIdempotencyStore({ sweepIntervalMs: 0 }));
    const app = await boot({ store });
    try {
      let ran = false;
      const run = app.get(IdempotencyService).run('k', () => (ran = true), { resumable: true });
      await expect(run).rejects.toThrow(
        'IdempotencyService.run: `resumable` needs a store that records steps (recordStep): WrappedStore cannot',
      );
      expect(ran).toBe(false);
    } finally {
      await app.close();
    }
  });

  it('refuses to boot a resumable route (module-wide), naming it', async () => {
    @Controller()
    class Orders {
      @Post('orders')
      @Idempotent()
      create() {
        return {};
      }
    }
    const store = new WrappedStore(new MemoryIdempotencyStore({ sweepIntervalMs: 0 }));
    @Module({
      imports: [IdempotencyModule.forRoot({ store, resumable: true })],
      controllers: [Orders],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await expect(app.init()).rejects.toThrow(
      'IdempotencyModule: Orders.create is resumable, and `resumable` needs a store that records steps',
    );
    await app.close();
  });
});
