import type { Logger } from '@nestjs/common';
import { channel, type Channel } from 'node:diagnostics_channel';
import type {
  IdempotencyEvent,
  IdempotencyEventType,
} from '../interfaces/idempotency-event.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { IdempotencyMetrics } from '../observability/metrics';

/** Prefix of the diagnostics channels: one per event type, `nestjs-idempotency:<type>`. */
export const DIAGNOSTICS_CHANNEL_PREFIX = 'nestjs-idempotency:';

/** The channels by event type, made on first use (the same object Node returns for the name). */
const channels = new Map<IdempotencyEventType, Channel>();

/**
 * The `node:diagnostics_channel` channel of an event type, `nestjs-idempotency:<type>`, on which
 * every event of that type is published (the `onEvent` payload), for APM agents and tools that
 * subscribe without code in the app.
 */
export function diagnosticsChannel(type: IdempotencyEventType): Channel {
  let found = channels.get(type);
  if (!found) channels.set(type, (found = channel(`${DIAGNOSTICS_CHANNEL_PREFIX}${type}`)));
  return found;
}

/** Where an event happened: the route's options, handler and identity. */
export interface EventSource {
  options: Pick<ResolvedIdempotencyOptions, 'onEvent'>;
  /** `Controller.method`. */
  handler: string;
  /** The route's identity in record keys (see `routeIdentity`). */
  route: string;
}

/**
 * Reports what happened to each request: to `onEvent`, to `node:diagnostics_channel`
 * (`nestjs-idempotency:<type>`), to the metrics, and (once per kind and handler) to the log.
 */
export class OutcomeEvents {
  /** The kinds of warning logged, per handler. */
  private readonly warned = new Map<string, Set<string>>();

  constructor(
    private readonly logger: Logger,
    readonly metrics?: IdempotencyMetrics,
  ) {}

  emit(
    source: EventSource,
    type: IdempotencyEventType,
    key?: string,
    error?: unknown,
    record?: IdempotencyEvent['record'],
  ): void {
    const { options, handler, route } = source;
    if (this.metrics?.recording) this.metrics.outcome(type, handler);
    const published = diagnosticsChannel(type);
    // Checked first, so that an app nobody observes builds no event object for the channel.
    if (!options.onEvent && !published.hasSubscribers) return;
    const event: IdempotencyEvent = { type, handler, route, key, error };
    if (record) event.record = record;
    // Node reports a subscriber's error as an uncaught exception, never to the publisher.
    if (published.hasSubscribers) published.publish(event);
    if (!options.onEvent) return;
    try {
      options.onEvent(event);
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
