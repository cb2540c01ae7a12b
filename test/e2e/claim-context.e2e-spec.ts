import { Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, Idempotent } from '../../lib';
import { currentClaim } from '../../lib/propagation/claim-context';
import { listen } from '../support/http-app';
import { post } from '../support/test-app';

// A claimed handler runs in an AsyncLocalStorage context only when something can read it
// (derived keys, propagated keys, steps): on Node 22 the first such context switches on promise
// hooks for the whole process. (derived-keys-without-secret.e2e-spec.ts: what a derived key does
// then, in a process of its own.)

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
    const withSecret = await start({ keyDerivationSecret: SECRET });
    try {
      const context = async (url: string, path: string) =>
        (await post(url, path, { key: randomUUID() })).json();
      expect(await context(plain.url, '/context')).toEqual({ inContext: false });
      expect(await context(plain.url, '/resumable')).toEqual({ inContext: true });
      expect(await context(withSecret.url, '/context')).toEqual({ inContext: true });
    } finally {
      await plain.app.close();
      await withSecret.app.close();
    }
  });
});
