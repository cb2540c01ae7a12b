import {
  Inject,
  Logger,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { ModuleRef, ModulesContainer } from '@nestjs/core';
import { IDEMPOTENCY_OPTIONS } from './idempotency.constants';
import { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN } from './idempotency.module-definition';
import { IdempotencyInterceptor } from './interceptors/idempotency.interceptor';
import { IdempotencyRecords } from './services/idempotency-records.service';
import { hoistInterceptor } from './interceptors/outermost';
import { checkRoutes } from './interceptors/route-checks';
import { createStore, waitUntilReady } from './stores/create-store';
import { IdempotencyStore } from './stores/idempotency.store';
import { resolveModuleOptions, type ResolvedModuleOptions } from './utils/options';

/**
 * Provides the idempotency store and the options that `@Idempotent()` routes (bound to
 * {@link IdempotencyInterceptor}) use.
 *
 * @example
 * ```ts
 * IdempotencyModule.forRoot({ redis: 'redis://127.0.0.1:6379' })
 * IdempotencyModule.forRootAsync({
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ redis: config.get('REDIS_URL') }),
 * })
 * ```
 */
@Module({
  providers: [
    {
      provide: IDEMPOTENCY_OPTIONS,
      inject: [MODULE_OPTIONS_TOKEN],
      useFactory: resolveModuleOptions,
    },
    {
      provide: IdempotencyStore,
      inject: [IDEMPOTENCY_OPTIONS],
      useFactory: createStore,
    },
    IdempotencyRecords,
  ],
  exports: [IdempotencyStore, IDEMPOTENCY_OPTIONS, IdempotencyRecords],
})
export class IdempotencyModule
  extends ConfigurableModuleClass
  implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly logger = new Logger('Idempotency');

  constructor(
    @Inject(IDEMPOTENCY_OPTIONS)
    private readonly options: ResolvedModuleOptions,
    private readonly store: IdempotencyStore,
    private readonly modules: ModulesContainer,
    private readonly moduleRef: ModuleRef,
  ) {
    super();
    // Before Nest reads the routes' interceptors: @Idempotent() wraps every one of its route's.
    hoistInterceptor(modules, IdempotencyInterceptor);
  }

  /** Checks what can be checked before the first request (see {@link checkRoutes}). */
  onModuleInit(): void {
    checkRoutes(this.modules, this.options, this.store, this.moduleRef);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.options.store) return;
    // Boot never fails on an unreachable database: keyed requests get 503 until it is back.
    if (!(await waitUntilReady(this.store, this.options.storeTimeout))) {
      const database =
        this.options.postgres !== undefined
          ? 'PostgreSQL'
          : this.options.mysql !== undefined
            ? 'MySQL'
            : 'Redis';
      this.logger.warn(
        `${database} is not reachable yet; idempotent requests answer 503 until it is`,
      );
    }
  }

  async onApplicationShutdown(): Promise<void> {
    // A store passed in is the application's to close; ours (and clients we created) are ours.
    if (!this.options.store) await this.store.close();
  }
}
