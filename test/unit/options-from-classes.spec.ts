import { Test } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../../lib';
import { IDEMPOTENCY_OPTIONS } from '../../lib/idempotency.constants';
import type { ResolvedModuleOptions } from '../../lib/options';

/**
 * Options held by a class: a config class whose getters read the environment, handed to
 * `forRoot()` or returned by a `forRootAsync()` factory (`createIdempotencyOptions() { return
 * this; }`). Getters live on the prototype, where the name check (own names) does not look and
 * the resolution (a spread) does not copy: each such option is dropped without a word, and the
 * module boots on its default, which for `encryption` is plaintext and for `ttl` 24 hours.
 * Either read them or refuse the object; never boot as if they were not there.
 */
const key = randomBytes(32);

class IdempotencyConfig implements IdempotencyModuleOptions {
  get ttl(): number {
    return 60_000;
  }
  get encryption() {
    return { keys: [key] };
  }
  createIdempotencyOptions(): IdempotencyModuleOptions {
    return this;
  }
}

/** The options the module resolved at boot, or the error it failed to boot with. */
async function resolved(
  module: ReturnType<typeof IdempotencyModule.forRoot>,
): Promise<ResolvedModuleOptions | Error> {
  try {
    const compiled = await Test.createTestingModule({ imports: [module] }).compile();
    const options = compiled.get<ResolvedModuleOptions>(IDEMPOTENCY_OPTIONS);
    await compiled.close();
    return options;
  } catch (error) {
    return error as Error;
  }
}

/** What became of the class's options: kept, refused at boot, or dropped. */
function fate(result: ResolvedModuleOptions | Error): string {
  if (result instanceof Error) return 'refused at boot';
  if (result.ttl === 60_000 && result.encryption?.keys[0] === key) return 'kept';
  return `dropped: ttl ${result.ttl}, encryption ${result.encryption ? 'on' : 'off'}`;
}

describe('options held by getters of a config class', () => {
  it('forRoot(new Config()): kept or refused, never dropped', async () => {
    const result = await resolved(IdempotencyModule.forRoot(new IdempotencyConfig()));
    expect(['kept', 'refused at boot']).toContain(fate(result));
  });

  it('forRootAsync({ useClass }) returning the instance: kept or refused, never dropped', async () => {
    const result = await resolved(IdempotencyModule.forRootAsync({ useClass: IdempotencyConfig }));
    expect(['kept', 'refused at boot']).toContain(fate(result));
  });

  it('a factory returning an object built on a prototype of defaults: kept or refused', async () => {
    const defaults = { ttl: 60_000, encryption: { keys: [key] } };
    const result = await resolved(
      IdempotencyModule.forRootAsync({ useFactory: () => Object.create(defaults) as object }),
    );
    expect(['kept', 'refused at boot']).toContain(fate(result));
  });

  it('a factory returning a Map of options: refused, never booted on the defaults', async () => {
    const result = await resolved(
      IdempotencyModule.forRootAsync({
        useFactory: () => new Map<string, unknown>([['ttl', 60_000]]) as object,
      }),
    );
    expect(['kept', 'refused at boot']).toContain(fate(result));
  });
});
