import type { ExecutionContext } from '@nestjs/common';
import { from, Observable, throwError } from 'rxjs';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { fingerprint } from '../utils/fingerprint';
import { loadPeer } from '../utils/load-optional';
import { type ResponseSnapshot, unreplayableReason } from '../utils/response-codec';
import type { IdempotencyContextAdapter } from './context-adapter';
import { captureError, replayedError } from './value-outcome';

/** Payload field read when the transport carries no key header. */
export const PAYLOAD_KEY_FIELD = 'idempotencyKey';

/** The payload's `idempotencyKey` field, or undefined (a payload that is no object has none). */
export function payloadKey(data: unknown): unknown {
  return data !== null && typeof data === 'object'
    ? (data as Record<string, unknown>)[PAYLOAD_KEY_FIELD]
    : undefined;
}

/** The parts of Nest's transport contexts (NatsContext, RmqContext, KafkaContext...) used here. */
interface TransportContext {
  getHeaders?(): NatsHeaders | undefined;
  getMessage?(): {
    properties?: { headers?: Record<string, unknown> };
    headers?: Record<string, unknown>;
  };
  getPacket?(): { properties?: { userProperties?: Record<string, unknown> } };
  getPattern?(): string;
  getSubject?(): string;
  getChannel?(): string;
  getTopic?(): string;
}

/** How a value that JSON cannot carry was stored: `u` undefined, `b` a Buffer (base64). */
type ValueKind = 'u' | 'b';

/** What an RPC reply is stored as: every value emitted, and the kinds of those JSON would alter. */
interface StoredValues {
  v: unknown[];
  k?: Record<number, ValueKind>;
}

type RpcExceptionClass = new (error: string | object) => Error;

/**
 * Microservice handlers (`@MessagePattern`, `@EventPattern`) on any Nest transport. The key comes
 * from the transport's message headers where it has them (NATS headers, RabbitMQ message headers,
 * Kafka headers, MQTT 5 user properties), else from the payload's `idempotencyKey` field. Every
 * value the handler emits is stored, so a replay streams the same values.
 */
export class RpcContextAdapter implements IdempotencyContextAdapter {
  private readonly RpcException: RpcExceptionClass;

  constructor() {
    // Loaded here, not at import: HTTP-only apps need not install @nestjs/microservices.
    this.RpcException = loadPeer<{ RpcException: RpcExceptionClass }>(
      '@nestjs/microservices',
      'making @MessagePattern and @EventPattern handlers idempotent',
    ).RpcException;
  }

  unsupported(): undefined {
    return undefined;
  }

  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown {
    const rpc = context.switchToRpc();
    const header = readHeader(rpc.getContext<TransportContext>(), options.headerName);
    return header !== undefined ? header : payloadKey(rpc.getData());
  }

  fingerprint(context: ExecutionContext): string {
    return fingerprint(this.target(context), context.switchToRpc().getData());
  }

  target(context: ExecutionContext): string[] {
    const transport = context.switchToRpc().getContext<TransportContext>();
    const pattern =
      transport?.getPattern?.() ??
      transport?.getSubject?.() ??
      transport?.getChannel?.() ??
      transport?.getTopic?.() ??
      '';
    return [String(pattern)];
  }

  capture(_context: ExecutionContext, values: unknown[]): ResponseSnapshot | string {
    for (const value of values) {
      const reason = unreplayableReason(value);
      if (reason) return reason;
    }
    // Stored as JSON: undefined and Buffers are marked, so that a replay emits them as they were
    // (JSON would turn them into null and { type: 'Buffer', data }).
    const kinds: Record<number, ValueKind> = {};
    const stored = values.map((value, index) => {
      if (value === undefined) {
        kinds[index] = 'u';
        return null;
      }
      if (Buffer.isBuffer(value)) {
        kinds[index] = 'b';
        return value.toString('base64');
      }
      return value;
    });
    const value: StoredValues =
      Object.keys(kinds).length > 0 ? { v: stored, k: kinds } : { v: stored };
    return { value };
  }

  captureError(
    _context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot {
    return captureError(error, 'rpc', options.storeErrors);
  }

  errorStatus(): undefined {
    return undefined;
  }

  replay(
    _context: ExecutionContext,
    snapshot: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown> {
    if (snapshot.error) {
      const rebuild = (stored: { r?: unknown }) => new this.RpcException(stored.r as object);
      return throwError(() => replayedError(snapshot, options.storeErrors, rebuild));
    }
    const { v: values, k: kinds = {} } = snapshot.value as StoredValues;
    return from(
      values.map((value, index) => {
        if (kinds[index] === 'u') return undefined;
        if (kinds[index] === 'b') return Buffer.from(String(value), 'base64');
        return value;
      }),
    );
  }

  toException(_context: ExecutionContext, error: IdempotencyError): Error {
    return new this.RpcException(refusalBody(error));
  }
}

/** What a message transport's client reads of a refusal: an RpcException's error, a reply... */
export interface RefusalBody {
  status: 'error';
  code: IdempotencyError['code'];
  message: string;
  /** How long to wait before sending it again, in ms (in progress, store unavailable). */
  retryAfterMs?: number;
}

/**
 * A refusal as the message transports tell it (an RpcException's error, a gateway's `exception`
 * or ack, a golevelup RPC reply): Nest's `{ status: 'error', message }` with the code.
 */
export function refusalBody(error: IdempotencyError): RefusalBody {
  return {
    status: 'error',
    code: error.code,
    message: error.message,
    ...(error.retryAfterMs !== undefined && { retryAfterMs: error.retryAfterMs }),
  };
}

/** The parts of the `nats` package's MsgHdrs used here. */
interface NatsHeaders {
  values(name: string, match?: number): string[];
}

/** `Match.IgnoreCase` of the `nats` package. */
const NATS_IGNORE_CASE = 2;

/**
 * The key header from whichever transport this is, or undefined. Names match in any case, as in
 * HTTP; a key sent more than once comes back as an array, which the key check refuses.
 */
function readHeader(transport: TransportContext | undefined, name: string): unknown {
  if (!transport) return undefined;
  const nats = transport.getHeaders?.();
  if (nats) return single(nats.values(name, NATS_IGNORE_CASE));
  const message = transport.getMessage?.();
  const packet = transport.getPacket?.();
  const headers =
    message?.properties?.headers ?? message?.headers ?? packet?.properties?.userProperties;
  return headerValue(headers, name);
}

/**
 * A header of a message's headers (RabbitMQ, Kafka, MQTT 5 user properties), matched in any
 * case; undefined when absent, an array (refused as a key) when sent more than once.
 */
export function headerValue(headers: Record<string, unknown> | undefined, name: string): unknown {
  if (!headers) return undefined;
  const wanted = name.toLowerCase();
  const values = Object.keys(headers)
    .filter((header) => header.toLowerCase() === wanted)
    .map((header) => headers[header])
    .filter((value) => value !== undefined && value !== null)
    // Kafka headers arrive as Buffers.
    .map((value) => (Buffer.isBuffer(value) ? value.toString('utf8') : value));
  return single(values);
}

/** The one value, undefined for none, the array itself for several. */
function single(values: unknown[]): unknown {
  return values.length > 1 ? values : values[0];
}
