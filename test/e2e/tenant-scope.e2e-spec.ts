import {
  Body,
  CanActivate,
  Controller,
  ExecutionContext,
  Injectable,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib';
import { appForSuite } from '../support/http-app';
import { cleanUpPrefix, storeOptions, STORES, uniquePrefix } from '../support/redis';
import { PLATFORMS, post } from '../support/test-app';

/**
 * A `scope` function is how multi-tenant apps keep tenants apart. Its result is turned into the
 * record's scope with String(): a tenant object (what many auth layers attach: `request.tenant =
 * { id, plan }`, typed `any` so TypeScript does not object) becomes "[object Object]" for every
 * tenant, and an async function (as `key` and `fingerprint` may be) becomes "[object Promise]".
 * Every tenant then shares one scope: tenant B gets tenant A's response replayed. The principal
 * path refuses such values (IdempotencyScopeError); the tenant path does not.
 */

interface TenantRequest {
  headers: Record<string, string | undefined>;
  tenant?: { id: string; plan: string };
}

@Injectable()
class TenantFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<TenantRequest>();
    const id = request.headers['x-tenant'];
    if (id) request.tenant = { id, plan: 'pro' };
    return true;
  }
}

// What `request.tenant` is typed as in most apps (an untyped request augmentation).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const tenantOf = (ctx: ExecutionContext): any =>
  ctx.switchToHttp().getRequest<TenantRequest>().tenant;

@Controller('invoices')
@UseGuards(TenantFromHeader)
class InvoicesController {
  @Post('object')
  @Idempotent({ scope: (ctx) => tenantOf(ctx) })
  object(@Req() request: TenantRequest, @Body() body: { amount: number }) {
    return { tenant: request.tenant?.id, amount: body.amount, invoice: randomUUID() };
  }

  @Post('async')
  // An async scope, as the async key and fingerprint functions invite (cast: typed sync only).
  @Idempotent({ scope: (async (ctx: ExecutionContext) => tenantOf(ctx)?.id) as never })
  async(@Req() request: TenantRequest, @Body() body: { amount: number }) {
    return { tenant: request.tenant?.id, amount: body.amount, invoice: randomUUID() };
  }
}

describe.each(PLATFORMS)('tenant scope on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    const prefix = uniquePrefix('tenant-scope');
    const suite = appForSuite(
      platform,
      [InvoicesController],
      () => storeOptions(storeName, prefix),
      () => cleanUpPrefix(prefix),
    );

    it.each(['object', 'async'])(
      'tenant B never gets tenant A’s response replayed (scope function returning %s)',
      async (route) => {
        const key = randomUUID();
        const body = { amount: 100 };
        const a = await post(suite.url, `/invoices/${route}`, {
          key,
          body,
          headers: { 'x-tenant': 'a' },
        });
        const b = await post(suite.url, `/invoices/${route}`, {
          key,
          body,
          headers: { 'x-tenant': 'b' },
        });
        expect(a.status).toBe(201);
        expect({
          replayed: b.headers.get('idempotent-replayed'),
          tenant: (b.json() as { tenant?: string }).tenant,
        }).toEqual({ replayed: null, tenant: 'b' });
      },
    );
  });
});
