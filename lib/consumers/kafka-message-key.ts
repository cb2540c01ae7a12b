import type { ExecutionContext } from '@nestjs/common';
import { hash } from 'node:crypto';
import type { IdempotencyKeyValue } from '../interfaces/idempotency-options.interface';

/** The part of Nest's KafkaContext read here: the record, as Nest's KafkaParser decoded it. */
interface KafkaContextLike {
  getMessage?(): { key?: unknown } | undefined;
}

/**
 * A `key` option for `@Idempotent()` on a Kafka `@EventPattern` / `@MessagePattern` handler: the
 * record's message key, for producers whose message key names one event (an event id). Not for
 * a partitioning key shared by many events (a customer id): their records would meet, and every
 * event after the first would be refused as reusing the key (IDEMPOTENCY_KEY_REUSED, the payload
 * differing). Nest decodes the key as text, or as JSON when it starts with `{` or `[` (written
 * back as JSON here), or leaves it a Buffer when it starts with a zero byte (a schema registry's
 * framing: taken as base64). A key a route would refuse (not printable ASCII, as
 * `zahlung-müller-7`, or over 255 characters) is handed on as `sha256:` and its SHA-256 in
 * base64url, so that a legitimate event id is handled once rather than refused on every delivery
 * while its partition waits behind it. No message key: undefined (the handler runs unprotected,
 * or is refused with `required: true`). Outside a Kafka context: undefined too.
 *
 * @example
 * ```ts
 * @EventPattern('payments')
 * @Idempotent({ key: kafkaMessageKey, required: true })
 * ```
 */
export function kafkaMessageKey(context: ExecutionContext): IdempotencyKeyValue {
  const key = context.switchToRpc().getContext<KafkaContextLike | undefined>()?.getMessage?.()?.key;
  if (key === undefined || key === null) return undefined;
  const text =
    typeof key === 'string'
      ? key
      : Buffer.isBuffer(key)
        ? key.toString('base64')
        : JSON.stringify(key);
  return ROUTE_KEY.test(text) ? text : `sha256:${hash('sha256', text, 'base64url')}`;
}

/** A key every route takes as it is: printable ASCII, not blank at either end, 255 at most. */
const ROUTE_KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/;
