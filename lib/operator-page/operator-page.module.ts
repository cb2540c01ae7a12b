import { Controller, type DynamicModule, Module, UseGuards, VERSION_NEUTRAL } from '@nestjs/common';
import { OPERATOR_PAGE_OPTIONS, OperatorPageController } from './operator-page.controller';
import {
  type IdempotencyOperatorPageOptions,
  resolveOperatorPageOptions,
} from './operator-page.options';

/**
 * Serves the operator page from the app itself, at the path it chooses and behind its guards:
 * the records per state (running, stuck, half done, completed) with their counts, a list filtered
 * by route and age, one record's steps and stored outcome, and deletion (a stuck claim released)
 * after a confirmation. It reads through `IdempotencyRecords`, so `IdempotencyModule` must be
 * imported too (global by default). Server-rendered HTML, no scripts, nothing loaded from the
 * network, under a strict Content-Security-Policy; Express and Fastify alike.
 *
 * @example
 * ```ts
 * IdempotencyOperatorPageModule.register({ path: '/ops/idempotency', guards: [AdminGuard] })
 * ```
 */
@Module({})
export class IdempotencyOperatorPageModule {
  /**
   * Mounts the page at `options.path` behind `options.guards`. Its options are checked here, by
   * name and value: a page without a guard is refused when `NODE_ENV` is `production`.
   */
  static register(options: IdempotencyOperatorPageOptions): DynamicModule {
    const resolved = resolveOperatorPageOptions(options);
    // A class per registration: the path and guards are its own metadata, as @Controller() and
    // @UseGuards() would set them, so Nest resolves the guards through DI like any other's, and
    // a second page (another prefix) does not share the first one's.
    @Controller({ path: resolved.path, version: VERSION_NEUTRAL })
    class IdempotencyOperatorPageController extends OperatorPageController {}
    if (resolved.guards.length) UseGuards(...resolved.guards)(IdempotencyOperatorPageController);
    return {
      module: IdempotencyOperatorPageModule,
      imports: options.imports ?? [],
      controllers: [IdempotencyOperatorPageController],
      providers: [{ provide: OPERATOR_PAGE_OPTIONS, useValue: resolved }],
    };
  }
}
