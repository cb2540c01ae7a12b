import { InternalServerErrorException, type Logger } from '@nestjs/common';
import { ModuleRef, ModulesContainer, type Reflector } from '@nestjs/core';
import { IdempotentOptions } from '../decorators/idempotent-options.metadata';
import { IdempotencyStore, type ClaimResult } from '../stores/idempotency.store';
import { controllers } from './outermost';
import { routeName } from './route-resolver';

/** Where the module is missing, as the logs and the refused client hear it. */
const NOT_IMPORTED = 'IdempotencyModule is not imported';

/** How many routes the boot warning names before it counts the rest. */
const NAMED_ROUTES = 5;

/**
 * The store of an interceptor Nest built without IdempotencyModule (a controller's own test, an
 * app that forgot the module). Never reached: such an interceptor refuses every keyed request
 * before its claim (see {@link ModuleMissing}); were one to get here, it fails as loudly.
 */
export class MissingModuleStore extends IdempotencyStore {
  claim(): Promise<ClaimResult> {
    return Promise.reject(new Error(NOT_IMPORTED));
  }
  complete(): Promise<boolean> {
    return Promise.reject(new Error(NOT_IMPORTED));
  }
  release(): Promise<boolean> {
    return Promise.reject(new Error(NOT_IMPORTED));
  }
  extend(): Promise<boolean> {
    return Promise.reject(new Error(NOT_IMPORTED));
  }
}

/**
 * What an `@Idempotent()` route does when Nest built its interceptor without IdempotencyModule
 * (no store, no options to inject). `@Idempotent()` binds the interceptor itself, so without
 * this a controller's own test (`Test.createTestingModule({ controllers: [CatsController] })`)
 * failed to compile. Such a route serves requests without a key (the handler runs, as without
 * the decorator) and refuses those carrying one with 500: a client that sent a key relies on it,
 * and the route must never run that request unprotected. The app hears of it twice: a warning at
 * boot, naming the routes, and an error at the first refused request.
 */
export class ModuleMissing {
  private refused = false;

  constructor(
    private readonly logger: Logger,
    private readonly reflector: Reflector,
    private readonly moduleRef?: ModuleRef,
  ) {}

  /** Logs, once per module hosting such routes, which routes refuse keyed requests and why. */
  warnAtBoot(): void {
    const { module, routes } = this.hostedRoutes();
    const named = routes.slice(0, NAMED_ROUTES).join(', ');
    const more = routes.length > NAMED_ROUTES ? ` and ${routes.length - NAMED_ROUTES} more` : '';
    const where = routes.length > 0 ? ` (${named}${more}${module ? ` in ${module}` : ''})` : '';
    this.logger.warn(
      `${NOT_IMPORTED}, so @Idempotent() routes${where} cannot protect anything: they run ` +
        'requests without a key and refuse (500) those carrying one. Import ' +
        "IdempotencyModule.forRoot() in the app's root module (with isGlobal: false, in the " +
        "routes' own module); a test that never sends a key can ignore this.",
    );
  }

  /** The error a request carrying a key is refused with; the first one is logged. */
  refuse(handler: string): Error {
    if (!this.refused) {
      this.refused = true;
      this.logger.error(
        `${handler}: ${NOT_IMPORTED}; a request carrying an idempotency key was refused (500) ` +
          'rather than run unprotected',
      );
    }
    return new InternalServerErrorException(
      `${NOT_IMPORTED}: this server cannot honour the idempotency key, so the request was not processed`,
    );
  }

  /** The `@Idempotent()` routes of the module this interceptor was built in, and its name. */
  private hostedRoutes(): { module?: string; routes: string[] } {
    const modules = this.moduleRef?.get(ModulesContainer, { strict: false });
    const host =
      modules &&
      [...modules.values()].find(
        (module) => module.providers.get(ModuleRef)?.instance === this.moduleRef,
      );
    if (!modules || !host) return { routes: [] };
    const routes: string[] = [];
    for (const { module, metatype, handlers } of controllers(modules)) {
      if (module !== host) continue;
      for (const handler of handlers) {
        const options =
          this.reflector.get(IdempotentOptions, handler as never) ??
          this.reflector.get(IdempotentOptions, metatype as never);
        if (options && options.enabled !== false) routes.push(routeName(metatype, handler));
      }
    }
    return { module: host.name, routes };
  }
}
