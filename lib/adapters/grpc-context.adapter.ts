import type { ExecutionContext } from '@nestjs/common';
import { defer, Observable, of } from 'rxjs';
import { type IdempotencyError, IdempotencyErrorCode } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { fingerprint } from '../utils/fingerprint';
import { loadPeer } from '../utils/load-optional';
import { PATTERN_METADATA } from '../utils/nest-metadata';
import type { ResponseSnapshot } from '../utils/response-codec';
import type { IdempotencyContextAdapter } from './context-adapter';
import { captureError, captureValue, replayValue } from './value-outcome';

/** What `@GrpcMethod()` / `@GrpcStreamMethod()` store as a handler's pattern. */
export interface GrpcPattern {
  service: string;
  rpc: string;
  streaming: string;
}

/** The gRPC status codes refusals are answered with (`@grpc/grpc-js`'s `status`). */
export const GRPC_STATUS: Record<IdempotencyErrorCode, number> = {
  [IdempotencyErrorCode.KeyMissing]: 3, // INVALID_ARGUMENT
  [IdempotencyErrorCode.KeyInvalid]: 3, // INVALID_ARGUMENT
  [IdempotencyErrorCode.KeyReused]: 9, // FAILED_PRECONDITION
  [IdempotencyErrorCode.InProgress]: 10, // ABORTED
  [IdempotencyErrorCode.StoreUnavailable]: 14, // UNAVAILABLE
  [IdempotencyErrorCode.RecordUnreadable]: 13, // INTERNAL
};

/** Trailing metadata entry that tells a client refused as in progress how long to wait, in ms. */
export const GRPC_RETRY_AFTER_METADATA = 'retry-after-ms';

/** The parts of `@grpc/grpc-js`'s Metadata used here. */
interface GrpcMetadata {
  get(key: string): (string | Buffer)[];
  set(key: string, value: string): void;
}

/** The call object of a unary method. */
interface GrpcCall {
  /** Where a guard that authenticated the call may put its principal, as Passport does on HTTP. */
  user?: unknown;
}

type RpcExceptionClass = new (error: string | object) => Error;

/** The `@GrpcMethod()` pattern of a handler, or undefined for any other handler. */
export function grpcPattern(handler: object): GrpcPattern | undefined {
  const patterns = Reflect.getMetadata(PATTERN_METADATA, handler) as unknown[] | undefined;
  const pattern = patterns?.[0] as Partial<GrpcPattern> | undefined;
  return typeof pattern === 'object' &&
    pattern !== null &&
    typeof pattern.rpc === 'string' &&
    typeof pattern.streaming === 'string'
    ? (pattern as GrpcPattern)
    : undefined;
}

/**
 * Unary gRPC methods (`@GrpcMethod()`, Transport.GRPC). The key comes from the call's metadata
 * (`idempotency-key`, the `headerName` lower-cased), or from the request message through the
 * `key` option; the fingerprint is the service, method and request message. What the method
 * returned is stored (Buffers, Dates and bigints tagged), so a replay hands the serialiser the
 * same message. Refusals are RpcExceptions carrying a gRPC status code, the error code at the
 * start of the details, and for one in progress the delay in trailing metadata.
 */
export class GrpcContextAdapter implements IdempotencyContextAdapter {
  private readonly RpcException: RpcExceptionClass;
  private readonly Metadata: new () => GrpcMetadata;

  constructor() {
    // Loaded here, not at import: apps without gRPC need not install either package.
    const feature = 'making @GrpcMethod() handlers idempotent';
    this.RpcException = loadPeer<{ RpcException: RpcExceptionClass }>(
      '@nestjs/microservices',
      feature,
    ).RpcException;
    this.Metadata = loadPeer<{ Metadata: new () => GrpcMetadata }>(
      '@grpc/grpc-js',
      feature,
    ).Metadata;
  }

  unsupported(context: ExecutionContext): string | undefined {
    return grpcPattern(context.getHandler())?.streaming !== 'no_stream'
      ? 'streaming gRPC methods cannot be replayed'
      : undefined;
  }

  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown {
    const metadata = context.getArgByIndex<GrpcMetadata | undefined>(1);
    const values = metadata?.get(options.headerName.toLowerCase()) ?? [];
    const keys = values.map((value) => (Buffer.isBuffer(value) ? value.toString('utf8') : value));
    // Sent more than once: an array, which the key check refuses.
    return keys.length > 1 ? keys : keys[0];
  }

  principal(context: ExecutionContext): unknown {
    return context.getArgByIndex<GrpcCall | undefined>(2)?.user;
  }

  fingerprint(context: ExecutionContext): string {
    return fingerprint(this.target(context), context.getArgByIndex(0));
  }

  target(context: ExecutionContext): string[] {
    const pattern = grpcPattern(context.getHandler());
    return ['grpc', `${pattern?.service}/${pattern?.rpc}`];
  }

  /** `grpc OrderService/Create`: the service's method, which one handler serves. */
  routePattern(context: ExecutionContext): string {
    return this.target(context).join(' ');
  }

  capture(_context: ExecutionContext, values: unknown[]): ResponseSnapshot | string {
    // A server-streaming method declared with @GrpcMethod() (grpc-js hands unary and streaming
    // methods the same kind of call): several messages cannot replay as one, so none is stored.
    if (values.length > 1) return 'several messages (a server-streaming method)';
    return captureValue(values[values.length - 1]);
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
    return defer(() =>
      of(
        replayValue(
          snapshot,
          options.storeErrors,
          (stored) => new this.RpcException(stored.r as string | object),
        ),
      ),
    );
  }

  toException(_context: ExecutionContext, error: IdempotencyError): Error {
    const details: Record<string, unknown> = {
      code: GRPC_STATUS[error.code],
      message: `${error.code}: ${error.message}`,
    };
    if (error.retryAfterMs !== undefined) {
      const metadata = new this.Metadata();
      metadata.set(GRPC_RETRY_AFTER_METADATA, String(error.retryAfterMs));
      details.metadata = metadata;
      details.message += ` Retry after ${error.retryAfterMs} ms.`;
    }
    return new this.RpcException(details);
  }
}
