import type { Logger } from '@nestjs/common';
import type { IdempotencyEventType } from '../interfaces/idempotency-event.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { IdempotencyMetrics } from '../observability/metrics';

/** Where an event happened: the route's options, handler and identity. */
export interface EventSource {
  options: Pick<ResolvedIdempotencyOptions, 'onEvent'>;
  /** `Controller.method`. */
  handler: string;
  /** The route's identity in record keys (see `routeIdentity`). */
  route: string;
}

/**
 * Reports what happened to each request: to `onEvent`, to the metrics, and (once per kind and
 * handler) to the log.
 */
export class OutcomeEvents {
  /** The kinds of warning logged, per handler. */
  private readonly warned = new Map<string, Set<string>>();

  constructor(
    private readonly logger: Logger,
    readonly metrics?: IdempotencyMetrics,
  ) {}

  emit(source: EventSource, type: IdempotencyEventType, key?: string, error?: unknown): void {
    const { options, handler, route } = source;
    if (this.metrics?.recording) this.metrics.outcome(type, handler);
    if (!options.onEvent) return;
    try {
      options.onEvent({ type, handler, route, key, error });
    } catch (listenerError) {
      this.logger.error(`onEvent listener threw (${describe(listenerError)})`);
    }
  }

  /**
   * Logs a warning the first time `kind` happens on a handler. Kinds are few per handler, so the
   * set stays small; messages (with sizes or error texts) would grow it without bound.
   */
  warnOnce(handler: string, message: string, kind = message): void {
    let kinds = this.warned.get(handler);
    if (kinds?.has(kind)) return;
    if (!kinds) this.warned.set(handler, (kinds = new Set()));
    kinds.add(kind);
    this.logger.warn(`${handler}: ${message}`);
  }
}

/** An error's message, or the value as text (whatever was thrown: never throws itself). */
export function describe(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return Object.prototype.toString.call(error);
  }
}
