import {
  DynamicModule,
  Inject,
  Logger,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { ModuleRef, ModulesContainer } from '@nestjs/core';
import { IDEMPOTENCY_OPTIONS } from './idempotency.constants';
import {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN,
  type IdempotencyModuleAsyncOptions,
  type IdempotencyModuleRootOptions,
} from './idempotency.module-definition';
import { IdempotencyInterceptor } from './interceptors/idempotency.interceptor';
import { AbandonedRunReporter } from './services/abandoned-reporter';
import { IdempotencyRecords } from './services/idempotency-records.service';
import { IdempotencyService } from './services/idempotency.service';
import { hoistInterceptor } from './interceptors/outermost';
import { checkRoutes } from './interceptors/route-checks';
import { createStore } from './stores/create-store';
import { IdempotencyStore } from './stores/idempotency.store';
import { storeBootWarnings, storeName, storeReady } from './stores/store-hooks';
import {
  checkForRootAsyncOptions,
  checkForRootOptions,
  plainOptions,
  resolveModuleOptions,
  type ResolvedModuleOptions,
} from './options';

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
    IdempotencyService,
  ],
  exports: [IdempotencyStore, IDEMPOTENCY_OPTIONS, IdempotencyRecords, IdempotencyService],
})
export class IdempotencyModule
  extends ConfigurableModuleClass
  implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly logger = new Logger('Idempotency');
  /** Reports abandoned half-done runs and keeps the record gauges, from boot to shutdown. */
  private reporter?: AbandonedRunReporter;

  /**
   * Registers the module with `options` (their names checked here, their values at bootstrap);
   * without an argument, with every default (the in-memory store: see `allowInMemoryStorage`).
   */
  static override forRoot(options: IdempotencyModuleRootOptions = {}): DynamicModule {
    checkForRootOptions(options);
    return super.forRoot(plainOptions(options));
  }

  /**
   * Registers the module with the options a factory or class returns (checked at bootstrap,
   * names and values); `forRootAsync()`'s own option names are checked here.
   */
  static override forRootAsync(options: IdempotencyModuleAsyncOptions): DynamicModule {
    checkForRootAsyncOptions(options);
    return super.forRootAsync(options);
  }

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

  /**
   * Waits (bounded by `storeTimeout`) until a store the module built is ready, so boot does not
   * race the first request, then logs what the store warns about (Redis: an eviction policy that
   * may drop records). A store passed as `store` is the app's to make ready. Starts the reporter
   * of abandoned runs (`abandonedAfter`) and the record gauges first: they wait for the store.
   */
  async onApplicationBootstrap(): Promise<void> {
    const records = this.moduleRef.get(IdempotencyRecords);
    this.reporter = AbandonedRunReporter.start(records, this.store, this.options, this.logger);
    const { store, storeTimeout } = this.options;
    // Boot never fails on an unreachable database: keyed requests get 503 until it is back.
    if (!store && !(await storeReady(this.store, storeTimeout))) {
      this.logger.warn(
        `${storeName(this.store)} is not reachable yet; idempotent requests answer 503 until it is`,
      );
      return;
    }
    for (const warning of await storeBootWarnings(this.store, storeTimeout)) {
      this.logger.warn(warning);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.reporter?.stop();
    // A store passed in is the application's to close; ours (and clients we created) are ours.
    if (!this.options.store) await this.store.close();
  }
}
