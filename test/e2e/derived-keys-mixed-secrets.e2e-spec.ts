import { Module } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule } from '../../lib';
import { DerivingController } from '../support/deriving-controller';
import { listen } from '../support/http-app';
import { post } from '../support/test-app';

// Two apps in one process (this test file: Jest gives each its own), one with a
// keyDerivationSecret and one without. A claimed handler of the one without must still get the
// configuration error from both functions: not "outside a claimed handler", and never an
// undefined key from tryDerivedIdempotencyKey() that would let a provider charge twice.

describe('derived keys in a process where another module has a keyDerivationSecret', () => {
  it('fail as the configuration error in a claimed handler of the module without one', async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ keyDerivationSecret: randomUUID() + randomUUID() })],
      controllers: [DerivingController],
    })
    class WithSecret {}
    @Module({ imports: [IdempotencyModule.forRoot({})], controllers: [DerivingController] })
    class WithoutSecret {}
    const withSecret = await listen('express', WithSecret);
    const without = await listen('express', WithoutSecret);
    const errors: string[] = [];
    without.app.useLogger({
      log: () => {},
      warn: () => {},
      error: (message: unknown, stack?: unknown) =>
        errors.push(`${String(message)} ${String(stack)}`),
    });
    try {
      const derived = await post(withSecret.url, '/derived', { key: randomUUID() });
      expect(derived.status).toBe(201);
      expect(derived.json()).toMatchObject({ key: expect.stringMatching(/^[\w-]{43}$/) });
      for (const path of ['/derived', '/try-derived']) {
        expect((await post(without.url, path, { key: randomUUID() })).status).toBe(500);
      }
      expect(errors.join('\n')).toMatch(/keyDerivationSecret/);
      expect(errors.join('\n')).not.toMatch(/only available inside a claimed/);
    } finally {
      await without.app.close();
      await withSecret.app.close();
    }
  });
});
