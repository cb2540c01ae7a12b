import { ExecutionContext, HttpException } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import { Observable, of, throwError } from 'rxjs';
import { FORBIDDEN_REPLAY_HEADERS, REPLAYED_HEADER, STATUS_HEADER } from '../idempotency.constants';
import {
  DEFAULT_PROBLEM_TYPE_BASE,
  HTTP_ERROR_NAME,
  IDEMPOTENCY_HTTP_STATUS,
  type IdempotencyProblemDetails,
} from '../errors/http-status';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyErrorTitle,
} from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { describeError, errorStatus, rebuildError, type StoredError } from '../utils/error-codec';
import { fingerprint } from '../utils/fingerprint';
import { requestPrincipal } from '../utils/principal';
import { ResponseSnapshot, unreplayableReason } from '../utils/response-codec';
import {
  REDIRECT_METADATA,
  RENDER_METADATA,
  respondsItself,
  SSE_METADATA,
} from '../utils/nest-metadata';
import type { IdempotencyContextAdapter, IdempotencyOutcome } from './context-adapter';
import { isExpressJson } from './express-json';
import { isMultipart, multipartFingerprint, type MultipartRequestLike } from './multipart';

/** Media type of RFC 9457 problem details in JSON. */
const PROBLEM_JSON = 'application/problem+json';
const JSON_TYPE = 'application/json';

/** What the option `statusHeader` says for each error. */
const OUTCOMES: Record<IdempotencyErrorCode, IdempotencyOutcome> = {
  [IdempotencyErrorCode.KeyMissing]: 'key-missing',
  [IdempotencyErrorCode.KeyInvalid]: 'key-invalid',
  [IdempotencyErrorCode.InProgress]: 'in-progress',
  [IdempotencyErrorCode.KeyReused]: 'key-reused',
  [IdempotencyErrorCode.StoreUnavailable]: 'store-unavailable',
  [IdempotencyErrorCode.RecordUnreadable]: 'record-unreadable',
};

interface HttpRequestLike extends MultipartRequestLike {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  rawHeaders?: string[];
  raw?: { rawHeaders?: string[]; readableEnded?: boolean };
  body?: unknown;
  /** Express: the route that matched. */
  route?: { path?: unknown };
  /** Fastify: the route that matched. */
  routeOptions?: { url?: unknown };
}

interface HttpResponseLike {
  statusCode: number;
  getHeaders(): Record<string, number | string | string[] | undefined>;
}

/** HTTP on Express or Fastify: the key is a header, the response is status + headers + body. */
export class HttpContextAdapter implements IdempotencyContextAdapter {
  /** Handlers that write the response themselves, cached per handler function. */
  private readonly selfResponding = new WeakMap<object, string | undefined>();
  /** Headers {@link toException} set, per response: Retry-After, the problem Content-Type. */
  private readonly setHeaders = new WeakMap<object, string[]>();
  /** Handlers whose result Nest renders or redirects with, cached per handler function. */
  private readonly renders = new WeakMap<object, boolean>();

  /**
   * @param globalsPassText whether the app's global interceptors hand text on as it is (see
   *   `GlobalSerializers.passText`); without it, replays always hand Express the value
   */
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly globalsPassText: () => boolean = () => false,
  ) {}

  unsupported(context: ExecutionContext): string | undefined {
    return Reflect.getMetadata(SSE_METADATA, context.getHandler())
      ? '@Sse() streams cannot be replayed'
      : undefined;
  }

  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown {
    const request = context.switchToHttp().getRequest<HttpRequestLike>();
    const name = options.headerName.toLowerCase();
    const value = request.headers[name];
    // Node joins repeated headers with ", ": a comma is the cue to count the raw occurrences.
    if (typeof value === 'string' && value.includes(',')) {
      const raw = request.rawHeaders ?? request.raw?.rawHeaders ?? [];
      let count = 0;
      for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === name) count++;
      if (count > 1) return [value];
    }
    return value;
  }

  principal(context: ExecutionContext): unknown {
    return requestPrincipal(context.switchToHttp().getRequest<HttpRequestLike>());
  }

  fingerprint(context: ExecutionContext): string | Promise<string> {
    const request = context.switchToHttp().getRequest<HttpRequestLike>();
    const parts = [request.method, request.originalUrl ?? request.url];
    // A multipart body is parsed by a route interceptor (FileInterceptor), which runs before the
    // claim (see hoistInterceptor); its parts are read once parsed, and never taken as the same.
    if (isMultipart(request)) return multipartFingerprint(parts, request);
    // Only what a body parser read is part of it: on Express, register one for other types
    // (`app.useBodyParser('text')`), or same-key requests with other bodies replay.
    return fingerprint(parts, request.body);
  }

  target(context: ExecutionContext): string[] {
    const request = context.switchToHttp().getRequest<HttpRequestLike>();
    const url = request.originalUrl ?? request.url;
    const query = url.indexOf('?');
    return [request.method, query === -1 ? url : url.slice(0, query)];
  }

  routePattern(context: ExecutionContext): string | undefined {
    const request = context.switchToHttp().getRequest<HttpRequestLike>();
    const path = request.route?.path ?? request.routeOptions?.url;
    return typeof path === 'string' ? `${request.method} ${path}` : undefined;
  }

  capture(
    context: ExecutionContext,
    values: unknown[],
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot | string {
    if (values.length === 0) return 'an empty stream';
    // Nest answers an HTTP request with the last value a handler's Observable emits.
    const value = values[values.length - 1];
    const reason = this.selfRespondingReason(context) ?? unreplayableReason(value);
    if (reason) return reason;
    const response = context.switchToHttp().getResponse<HttpResponseLike>();
    return { status: response.statusCode, headers: replayable(response, options), value };
  }

  captureError(
    context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot {
    const response = context.switchToHttp().getResponse<HttpResponseLike>();
    const headers = replayable(response, options);
    return {
      status: errorStatus(error),
      headers,
      value: describeError(error, 'http', options.storeErrors),
      error: true,
    };
  }

  errorStatus(error: unknown): number {
    return errorStatus(error);
  }

  outcome(
    context: ExecutionContext,
    outcome: IdempotencyOutcome,
    options: ResolvedIdempotencyOptions,
  ): void {
    if (!options.statusHeader) return;
    const name = options.statusHeader === true ? STATUS_HEADER : options.statusHeader;
    const response = context.switchToHttp().getResponse<object>();
    this.adapterHost.httpAdapter.setHeader(response, name, outcome);
  }

  reset(context: ExecutionContext): void {
    const response = context.switchToHttp().getResponse<{ removeHeader(name: string): void }>();
    for (const name of this.setHeaders.get(response) ?? []) response.removeHeader(name);
    this.setHeaders.delete(response);
  }

  replay(
    context: ExecutionContext,
    snapshot: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown> {
    const adapter = this.adapterHost.httpAdapter;
    const response = context.switchToHttp().getResponse();
    // A stored error's status is set by the exception filter that answers the rebuilt error.
    if (snapshot.status !== undefined && !snapshot.error) adapter.status(response, snapshot.status);
    // Filtered again on the way out: a record written under another allowlist (or tampered
    // with in the store) must not make this response set cookies.
    for (const [name, value] of Object.entries(snapshot.headers ?? {})) {
      if (options.replayHeaders.includes(name) && !FORBIDDEN_REPLAY_HEADERS.includes(name)) {
        adapter.setHeader(response, name, value);
      }
    }
    adapter.setHeader(response, REPLAYED_HEADER, 'true');
    this.outcome(context, 'replayed', options);
    // An object or array: Nest sends it with res.json() (a number or boolean as text).
    const { json, value } = snapshot;
    if (
      json !== undefined &&
      typeof value === 'object' &&
      value !== null &&
      this.sendsJsonText(context, response)
    ) {
      // What res.json() would have sent, without serialising the value again.
      adapter.setHeader(response, 'Content-Type', JSON_TYPE);
      return of(json);
    }
    if (!snapshot.error) return of(snapshot.value);
    const status = snapshot.status ?? 500;
    const error = rebuildError(
      snapshot.value as StoredError,
      options.storeErrors,
      (stored) => new HttpException(stored.r as string | object, status),
    );
    return throwError(() => error);
  }

  toException(
    context: ExecutionContext,
    error: IdempotencyError,
    options: ResolvedIdempotencyOptions,
  ): Error {
    const status = IDEMPOTENCY_HTTP_STATUS[error.code];
    const response = context.switchToHttp().getResponse();
    this.outcome(context, OUTCOMES[error.code], options);
    if (error.retryAfterMs !== undefined) {
      const seconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
      this.adapterHost.httpAdapter.setHeader(response, 'Retry-After', String(seconds));
      this.remember(response, 'Retry-After');
    }
    if (!options.problemDetails) {
      return new HttpException(
        {
          statusCode: status,
          error: HTTP_ERROR_NAME[status],
          code: error.code,
          message: error.message,
        },
        status,
        { cause: error },
      );
    }
    const base =
      options.problemDetails === true
        ? DEFAULT_PROBLEM_TYPE_BASE
        : options.problemDetails.typeBaseUri;
    const problem: IdempotencyProblemDetails = {
      type: base + error.code.toLowerCase(),
      title: IdempotencyErrorTitle[error.code],
      status,
      detail: error.message,
      code: error.code,
    };
    this.setProblemContentType(response);
    return new HttpException(problem, status, { cause: error });
  }

  /** Marks the error response as `application/problem+json`, on the wire as well. */
  private setProblemContentType(response: object): void {
    const adapter = this.adapterHost.httpAdapter;
    adapter.setHeader(response, 'Content-Type', PROBLEM_JSON);
    this.remember(response, 'Content-Type');
    if (adapter.getType() === 'express') keepProblemContentType(response as ServerResponse);
  }

  private remember(response: object, header: string): void {
    const names = this.setHeaders.get(response) ?? [];
    this.setHeaders.set(response, [...names, header]);
  }

  /**
   * Whether a replay may hand Express a JSON body's stored text, which it sends as it is, where
   * the value would be serialised again to the same bytes. Only where nothing between this
   * interceptor and the client needs the value: on Express with its default JSON settings (no
   * `json replacer`, `json spaces` or `json escape`), with no Content-Type set yet, Express's own
   * `res.json()` (none an APM agent or a middleware put in its place), a route that neither
   * renders nor redirects, and no global interceptor but Nest's `ClassSerializerInterceptor`,
   * which hands text on.
   */
  private sendsJsonText(context: ExecutionContext, response: ServerResponse): boolean {
    const adapter = this.adapterHost.httpAdapter;
    if (adapter.getType() !== 'express' || response.getHeader('content-type') !== undefined) {
      return false;
    }
    const app = adapter.getInstance<{ get(setting: string): unknown }>();
    if (
      app.get('json replacer') !== undefined ||
      app.get('json spaces') !== undefined ||
      app.get('json escape') ||
      !isExpressJson((response as { json?: unknown }).json)
    ) {
      return false;
    }
    const handler = context.getHandler();
    let renders = this.renders.get(handler);
    if (renders === undefined) {
      renders =
        Reflect.hasMetadata(RENDER_METADATA, handler) ||
        Reflect.hasMetadata(REDIRECT_METADATA, handler);
      this.renders.set(handler, renders);
    }
    return !renders && this.globalsPassText();
  }

  /** `@Res()` without passthrough and `@Next()` handlers send the response themselves. */
  private selfRespondingReason(context: ExecutionContext): string | undefined {
    const handler = context.getHandler();
    if (this.selfResponding.has(handler)) return this.selfResponding.get(handler);
    const reason = respondsItself(context.getClass(), handler)
      ? 'written by the handler through @Res() or @Next()'
      : undefined;
    this.selfResponding.set(handler, reason);
    return reason;
  }
}

/** The response headers to store: those of `replayHeaders` the response has, lower-case. */
function replayable(
  response: HttpResponseLike,
  options: ResolvedIdempotencyOptions,
): Record<string, string> {
  const headers: Record<string, string> = {};
  const sent = response.getHeaders();
  for (const name of options.replayHeaders) {
    const header = sent[name];
    if (header !== undefined)
      headers[name] = Array.isArray(header) ? header.join(', ') : String(header);
  }
  return headers;
}

/**
 * Nest's exception filter sends the error body with the Content-Type already set, but Nest 11's
 * Express adapter replaces one that does not start with `application/json` by `application/json`
 * (Nest 12 accepts any `+json` type). This puts `application/problem+json` back just before the
 * headers are written, and only when it finds `application/json` there: a filter that answers
 * with a type of its own keeps it.
 */
function keepProblemContentType(response: ServerResponse): void {
  const writeHead = response.writeHead;
  response.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const type = this.getHeader('Content-Type');
    // Only on an error: an outer retry may answer this response with a success after all.
    if (this.statusCode >= 400 && typeof type === 'string' && type.startsWith(JSON_TYPE)) {
      this.setHeader('Content-Type', PROBLEM_JSON + type.slice(JSON_TYPE.length));
    }
    return writeHead.apply(this, args as Parameters<ServerResponse['writeHead']>);
  } as ServerResponse['writeHead'];
}
