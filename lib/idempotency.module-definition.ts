import { ConfigurableModuleBuilder } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { IdempotencyInterceptor } from './interceptors/idempotency.interceptor';
import type {
  IdempotencyModuleExtras,
  IdempotencyModuleOptions,
} from './interfaces/idempotency-module-options.interface';

export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<IdempotencyModuleOptions>({ moduleName: 'Idempotency' })
    .setClassMethodName('forRoot')
    .setFactoryMethodName('createIdempotencyOptions')
    .setExtras<IdempotencyModuleExtras>(
      { isGlobal: true, globalInterceptor: false },
      (definition, extras) => ({
        ...definition,
        global: extras.isGlobal,
        providers: extras.globalInterceptor
          ? [
              ...(definition.providers ?? []),
              { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
            ]
          : definition.providers,
      }),
    )
    .build();

/** What `IdempotencyModule.forRoot()` takes: the module options plus `isGlobal` and `globalInterceptor`. */
export type IdempotencyModuleRootOptions = typeof OPTIONS_TYPE;

/**
 * What `IdempotencyModule.forRootAsync()` takes: `imports`, `inject` and `useFactory`, or a class
 * ({@link IdempotencyOptionsFactory}) with `useClass` / `useExisting`, plus `isGlobal` and
 * `globalInterceptor`.
 */
export type IdempotencyModuleAsyncOptions = typeof ASYNC_OPTIONS_TYPE;

/** A class that `forRootAsync({ useClass })` or `{ useExisting }` instantiates to get the options. */
export interface IdempotencyOptionsFactory {
  createIdempotencyOptions(): IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
}
