import { Injectable, Module } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import {
  Idempotent,
  IdempotencyModule,
  IdempotentMethod,
  MemoryIdempotencyStore,
  type IdempotencyModuleOptions,
  type IdempotencyOptionsFactory,
} from '../../lib';
import { DEFAULT_OPTIONS, resolveModuleOptions, resolveRunOptions } from '../../lib/options';
import { IdempotencyHealthIndicator } from '../../lib/terminus';

/**
 * A misspelt or misplaced option name fails where it is set, with the nearest known name or
 * where the option goes, instead of being ignored while the option it meant keeps its default
 * (plaintext where encryption was asked for, a 24 h ttl where one hour was).
 */

const keys = [randomBytes(32)];

/** Compiles a testing module around `module`: what `NestFactory.create` does at boot. */
async function boot(module: ReturnType<typeof IdempotencyModule.forRootAsync>): Promise<void> {
  const compiled = await Test.createTestingModule({ imports: [module] }).compile();
  await compiled.close();
}

describe('IdempotencyModule.forRoot()', () => {
  it('refuses a misspelt name at the call, with the nearest option', () => {
    expect(() => IdempotencyModule.forRoot({ encrypton: { keys } } as never)).toThrow(
      new TypeError('IdempotencyModule: unknown option `encrypton` (did you mean `encryption`?)'),
    );
  });

  it("throws from forRoot() itself, so the stack names the app's module", () => {
    let stack = '';
    try {
      IdempotencyModule.forRoot({ lockTTL: 5000 } as never);
    } catch (error) {
      stack = (error as Error).stack ?? '';
    }
    expect(stack).toMatch(/unknown option `lockTTL` \(did you mean `lockTtl`\?\)/);
    expect(stack).toContain('unknown-option-names.spec.ts');
  });

  it('names forRootAsync() for its own names, and takes isGlobal and globalInterceptor', () => {
    expect(() => IdempotencyModule.forRoot({ useFactory: () => ({}) } as never)).toThrow(
      '`useFactory` is not taken here: set it in IdempotencyModule.forRootAsync()',
    );
    expect(() =>
      IdempotencyModule.forRoot({ isGlobal: false, globalInterceptor: false, ttl: '1h' }),
    ).not.toThrow();
  });

  it('still refuses what is not an options object, as before', () => {
    expect(() => IdempotencyModule.forRoot('redis://x' as never)).toThrow(
      /forRoot: the options was given "redis:\/\/x"/,
    );
  });
});

describe('what a forRootAsync() factory returns', () => {
  it('fails boot on a misspelt name', async () => {
    const module = IdempotencyModule.forRootAsync({
      useFactory: () => ({ lockTTL: 5000 }) as IdempotencyModuleOptions,
    });
    await expect(boot(module)).rejects.toThrow(
      'IdempotencyModule: unknown option `lockTTL` (did you mean `lockTtl`?)',
    );
  });

  it('fails boot on a misspelt name from useClass', async () => {
    @Injectable()
    class Config implements IdempotencyOptionsFactory {
      createIdempotencyOptions() {
        return { encrypton: { keys } } as IdempotencyModuleOptions;
      }
    }
    await expect(boot(IdempotencyModule.forRootAsync({ useClass: Config }))).rejects.toThrow(
      'unknown option `encrypton` (did you mean `encryption`?)',
    );
  });

  it("names forRootAsync()'s own options for isGlobal in the factory's result", () => {
    expect(() => resolveModuleOptions({ isGlobal: true } as never)).toThrow(
      "IdempotencyModule: `isGlobal` is not taken here: set it in IdempotencyModule.forRootAsync()'s own options, beside useFactory",
    );
  });

  it('boots with every known name', async () => {
    const module = IdempotencyModule.forRootAsync({
      useFactory: () => ({ ttl: '1h', lockTtl: 5000, encryption: { keys }, metrics: false }),
    });
    await expect(boot(module)).resolves.toBeUndefined();
  });
});

describe("forRootAsync()'s own options", () => {
  it('refuses a misspelt name at the call', () => {
    expect(() => IdempotencyModule.forRootAsync({ useFactroy: () => ({}) } as never)).toThrow(
      'IdempotencyModule.forRootAsync: unknown option `useFactroy` (did you mean `useFactory`?)',
    );
  });

  it('names the factory for a module option set beside it', () => {
    expect(() =>
      IdempotencyModule.forRootAsync({ useFactory: () => ({}), redis: 'redis://x' } as never),
    ).toThrow('`redis` is not taken here: set it in what the forRootAsync() factory returns');
  });

  it('takes its own names and the extras', () => {
    @Module({})
    class Empty {}
    expect(() =>
      IdempotencyModule.forRootAsync({
        imports: [Empty],
        inject: [],
        useFactory: () => ({}),
        isGlobal: false,
        globalInterceptor: false,
      }),
    ).not.toThrow();
  });
});

describe('@Idempotent()', () => {
  /** Declares a controller with `@Idempotent(options)` on a handler, as loading its file does. */
  const route = (options?: object | false) => () => {
    class Payments {
      @Idempotent(options as never)
      create(): void {}
    }
    return Payments;
  };

  it('refuses a misspelt name when the decorator is evaluated', () => {
    expect(route({ ttll: '1h' })).toThrow(
      new TypeError('@Idempotent(): unknown option `ttll` (did you mean `ttl`?)'),
    );
  });

  it.each(['redis', 'encryption', 'keyDerivationSecret', 'onEvent', 'metrics', 'store'])(
    'names IdempotencyModule.forRoot() for the module option %s',
    (name) => {
      expect(route({ [name]: undefined })).toThrow(
        `@Idempotent(): \`${name}\` is not taken here: set it in IdempotencyModule.forRoot()`,
      );
    },
  );

  it('takes every route option, and false', () => {
    expect(route({ ttl: '1h', required: true, scope: 'public' })).not.toThrow();
    expect(route(false)).not.toThrow();
    expect(route()).not.toThrow();
  });
});

describe('@IdempotentMethod()', () => {
  const decorate = (options: object) => () => {
    class Jobs {
      @IdempotentMethod(options as never)
      async run(): Promise<void> {}
    }
    return Jobs;
  };

  it('refuses a misspelt name when the decorator is evaluated', () => {
    expect(decorate({ key: () => 'k', scpoe: 'jobs' })).toThrow(
      '@IdempotentMethod(): unknown option `scpoe` (did you mean `scope`?)',
    );
    // `key` is taken here, though run() takes it as its first argument.
    expect(decorate({ kye: () => 'k' })).toThrow(
      /^@IdempotentMethod\(\): unknown option `kye` \(did you mean `key`\?\)$/,
    );
  });

  it('names where a route or module option goes', () => {
    expect(decorate({ key: () => 'k', required: true })).toThrow(
      '`required` is not taken here: set it in @Idempotent() on a route (run() has no request)',
    );
    expect(decorate({ key: () => 'k', redis: 'redis://x' })).toThrow(
      '`redis` is not taken here: set it in IdempotencyModule.forRoot()',
    );
  });

  it('refuses values run() would refuse on every call, and a fingerprint that is no function', () => {
    expect(decorate({ key: () => 'k', lockTtl: -1 })).toThrow(/lockTtl must be/);
    expect(decorate({ key: () => 'k', scope: '' })).toThrow(/scope must be a non-empty string/);
    expect(decorate({ key: () => 'k', fingerprint: 'x' })).toThrow(
      /fingerprint must be a function of the method's arguments/,
    );
  });

  it('takes run() options with a key function', () => {
    expect(
      decorate({ key: () => 'k', fingerprint: () => 1, scope: 'jobs', ttl: '1h', lockTtl: 5000 }),
    ).not.toThrow();
  });
});

describe('resolveRunOptions (what IdempotencyService.run() checks first)', () => {
  const where = 'IdempotencyService.run';

  it('refuses a misspelt name', () => {
    expect(() => resolveRunOptions({ scpoe: 'orders' }, where)).toThrow(
      new TypeError('IdempotencyService.run: unknown option `scpoe` (did you mean `scope`?)'),
    );
  });

  it.each([
    ['headerName', '@Idempotent() on a route (run() has no request)'],
    ['required', '@Idempotent() on a route (run() has no request)'],
    ['storeTimeout', "IdempotencyModule.forRoot() (run() takes the module's)"],
    ['keyPrefix', "IdempotencyModule.forRoot() (run() takes the module's)"],
    ['redis', 'IdempotencyModule.forRoot()'],
    ['onEvent', 'IdempotencyModule.forRoot()'],
  ])('names where %s goes', (name, place) => {
    expect(() => resolveRunOptions({ [name]: undefined }, where)).toThrow(
      `${where}: \`${name}\` is not taken here: set it in ${place}`,
    );
  });

  it('checks the scope and the values as run() did, with the same messages', () => {
    expect(() => resolveRunOptions({ scope: '' }, where)).toThrow(
      'IdempotencyService.run: scope must be a non-empty string',
    );
    expect(() => resolveRunOptions({ scope: 7 }, where)).toThrow(/scope must be a non-empty/);
    expect(() => resolveRunOptions({ scope: 'jobs', lockTtl: -1 }, where)).toThrow(
      'IdempotencyService.run (jobs): lockTtl must be a positive whole number, got -1',
    );
    expect(() => resolveRunOptions({ onConflict: 'queue' }, where)).toThrow(
      /IdempotencyService.run \(default\): onConflict must be 'reject' or 'wait'/,
    );
    expect(() => resolveRunOptions({ transactional: 'yes' }, where)).toThrow(/transactional/);
    expect(() => resolveRunOptions({ storeErrors: ['6xx'] }, where)).toThrow(/storeErrors/);
    expect(() => resolveRunOptions('orders', where)).toThrow(
      'IdempotencyService.run: options must be an object, got "orders"',
    );
  });

  it('returns the scope, the fingerprint and the defined overrides, durations in ms', () => {
    const fingerprint = { order: 1 };
    expect(
      resolveRunOptions(
        { scope: 'orders', fingerprint, ttl: '1h', lockTtl: '30s', waitTimeout: undefined },
        where,
      ),
    ).toEqual({ scope: 'orders', fingerprint, overrides: { ttl: 3_600_000, lockTtl: 30_000 } });
    const storeErrors = [402];
    expect(
      resolveRunOptions(
        { onConflict: 'reject', waitTimeout: 500, storeErrors, transactional: true },
        where,
      ),
    ).toEqual({
      scope: 'default',
      fingerprint: undefined,
      overrides: { onConflict: 'reject', waitTimeout: 500, storeErrors, transactional: true },
    });
    expect(resolveRunOptions(undefined, where)).toEqual({
      scope: 'default',
      fingerprint: undefined,
      overrides: {},
    });
  });
});

describe('IdempotencyHealthIndicator.pingCheck()', () => {
  const store = new MemoryIdempotencyStore();
  const indicator = new IdempotencyHealthIndicator(
    store,
    DEFAULT_OPTIONS,
    new HealthIndicatorService(),
  );
  afterAll(() => store.close());

  it('refuses a misspelt option instead of checking with the default timeout', async () => {
    await expect(indicator.pingCheck('idempotency', { timout: '5s' } as never)).rejects.toThrow(
      new TypeError('pingCheck: unknown option `timout` (did you mean `timeout`?)'),
    );
  });

  it('checks with its one option', async () => {
    await expect(indicator.pingCheck('idempotency', { timeout: '1s' })).resolves.toEqual({
      idempotency: { status: 'up' },
    });
  });
});
