import { Module } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { derivedIdempotencyKey, IdempotencyModule, tryDerivedIdempotencyKey } from '../../lib';
import { DerivingController } from '../support/deriving-controller';
import { listen } from '../support/http-app';
import { post } from '../support/test-app';

// No module of this process (this test file: Jest gives each its own) sets a keyDerivationSecret,
// so claimed handlers run without an async context (claim-context.e2e-spec.ts). Asking for a
// derived key still fails as the configuration error it is, as it did when every claimed handler
// had a context: claimed or not, never an undefined key that would let a provider charge twice.

describe('derived keys in a process without any keyDerivationSecret', () => {
  it('fail as the configuration error, in a claimed request and in one without a key', async () => {
    @Module({ imports: [IdempotencyModule.forRoot({})], controllers: [DerivingController] })
    class AppModule {}
    const { app, url } = await listen('express', AppModule);
    try {
      for (const path of ['/derived', '/try-derived']) {
        expect((await post(url, path, { key: randomUUID() })).status).toBe(500);
        expect((await post(url, path)).status).toBe(500);
      }
      expect(() => derivedIdempotencyKey('charge')).toThrow(/keyDerivationSecret/);
      expect(() => tryDerivedIdempotencyKey('charge')).toThrow(/keyDerivationSecret/);
    } finally {
      await app.close();
    }
  });
});
