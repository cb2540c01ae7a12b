import { Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, Idempotent } from '../../lib';
import { currentClaim } from '../../lib/propagation/claim-context';
import { listen } from '../support/http-app';
import { post } from '../support/test-app';

// A claimed handler runs in an AsyncLocalStorage context only when something can read it
// (derived keys, propagated keys, steps): on Node 22 the first such context switches on promise
// hooks for the whole process. Once a module of the process has a keyDerivationSecret, every
// claim has one, so that a derived key asked for under a module without a secret fails as the
// configuration error it is. (derived-keys-without-secret.e2e-spec.ts and
// derived-keys-mixed-secrets.e2e-spec.ts: what a derived key does then.)

const SECRET = 'claim-context-e2e-secret-0123456789abcdef';

@Controller()
class ContextController {
  @Post('context')
  @Idempotent({ scope: 'public' })
  context() {
    return { inContext: currentClaim() !== undefined };
  }

  @Post('resumable')
  @Idempotent({ scope: 'public', resumable: true })
  resumable() {
    return { inContext: currentClaim() !== undefined };
  }
}

async function start(options: IdempotencyModuleOptions) {
  @Module({ imports: [IdempotencyModule.forRoot(options)], controllers: [ContextController] })
  class AppModule {}
  return listen('express', AppModule);
}

describe('the async context of a claimed handler', () => {
  it('is not entered when nothing can read it, and is with a secret or resumable', async () => {
    const plain = await start({});
    let withSecret: Awaited<ReturnType<typeof start>> | undefined;
    try {
      const context = async (url: string, path: string) =>
        (await post(url, path, { key: randomUUID() })).json();
      expect(await context(plain.url, '/context')).toEqual({ inContext: false });
      expect(await context(plain.url, '/resumable')).toEqual({ inContext: true });
      withSecret = await start({ keyDerivationSecret: SECRET });
      expect(await context(withSecret.url, '/context')).toEqual({ inContext: true });
      expect(await context(plain.url, '/context')).toEqual({ inContext: true });
    } finally {
      await plain.app.close();
      await withSecret?.app.close();
    }
  });
});
