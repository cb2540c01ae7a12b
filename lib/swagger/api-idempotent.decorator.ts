import { RequestMethod, Type } from '@nestjs/common';
import { ApiHeader, DECORATORS } from '@nestjs/swagger';
import { Idempotent } from '../decorators/idempotent.decorator';
import { IDEMPOTENCY_HTTP_STATUS } from '../errors/http-status';
import { IdempotencyErrorCode, IdempotencyErrorTitle } from '../errors/idempotency.errors';
import { REPLAYED_HEADER } from '../idempotency.constants';
import type {
  IdempotencyOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import { HTTP_CODE_METADATA, METHOD_METADATA } from '../utils/nest-metadata';
import { DEFAULT_OPTIONS, mergeOptions } from '../options';

/**
 * Settings {@link ApiIdempotent} documents. They stand in for the module's `forRoot()` options,
 * which a decorator cannot see; the route's own `@Idempotent()` options win over them, as they do
 * at run time.
 */
export type ApiIdempotentOptions = Pick<
  IdempotencyOptions,
  'headerName' | 'required' | 'maxKeyLength' | 'fingerprint' | 'failOpen' | 'problemDetails'
>;

/** One response entry as @nestjs/swagger keeps it in its metadata (an OpenAPI response object). */
interface ResponseEntry {
  description?: string;
  headers?: Record<string, unknown>;
  [field: string]: unknown;
}

/** Handlers already documented, so a method and its class both decorated document it once. */
const documented = new WeakSet<object>();

/**
 * Documents an idempotent route in the OpenAPI document of @nestjs/swagger: the idempotency key
 * request header (required or not, with its maximum length), the `Idempotent-Replayed` header of
 * the success responses, and the 400, 409, 422 and 503 answers with their error body (Nest's JSON
 * or RFC 9457 problem details) and `code` values. On a controller class it documents every route
 * of the class.
 *
 * What it documents follows the route's `@Idempotent()` options (`required`, `headerName`,
 * `maxKeyLength`, `fingerprint`: 422 only when on, `failOpen`: 503 only when off), over the
 * options given here, over the defaults. It reads them once the class is fully decorated (in a
 * microtask), so the order of the decorators does not matter. A status the route already
 * documents with its own `@ApiResponse()` is left as it is.
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ required: true })
 * @ApiIdempotent()
 * @ApiCreatedResponse({ type: Payment })
 * create(@Body() dto: CreatePaymentDto) {}
 * ```
 */
export function ApiIdempotent(
  options: ApiIdempotentOptions = {},
): MethodDecorator & ClassDecorator {
  return (target: object, key?: string | symbol) => {
    // TypeScript applies decorators bottom-up, members before the class: @Post(), @HttpCode()
    // and @Idempotent() may come after this one. By the next microtask they have all run.
    queueMicrotask(() => {
      if (key !== undefined) {
        documentRoute(target, key, target.constructor as Type, options);
        return;
      }
      const controller = target as Type;
      for (const name of routeNames(controller)) {
        documentRoute(controller.prototype, name, controller, options);
      }
    });
  };
}

/** Names of the route handlers of a controller class, inherited ones included. */
function routeNames(controller: Type): string[] {
  const names = new Set<string>();
  for (let proto = controller.prototype; proto && proto !== Object.prototype;) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const value = Object.getOwnPropertyDescriptor(proto, name)?.value;
      if (typeof value === 'function' && Reflect.hasMetadata(METHOD_METADATA, value))
        names.add(name);
    }
    proto = Object.getPrototypeOf(proto);
  }
  return [...names];
}

function documentRoute(
  prototype: object,
  key: string | symbol,
  controller: Type,
  given: ApiIdempotentOptions,
): void {
  const descriptor = Object.getOwnPropertyDescriptor(prototype, key);
  const handler: unknown =
    descriptor?.value ?? (prototype as Record<string | symbol, unknown>)[key];
  if (typeof handler !== 'function' || documented.has(handler)) return;
  documented.add(handler);
  const options = mergeOptions(
    DEFAULT_OPTIONS,
    given,
    Reflect.getMetadata(Idempotent.KEY, controller) as IdempotencyOptions | undefined,
    Reflect.getMetadata(Idempotent.KEY, handler) as IdempotencyOptions | undefined,
  );

  ApiHeader({
    name: options.headerName,
    required: options.required,
    description:
      'Unique key of this operation, e.g. a UUID: a retry with the same key and request gets ' +
      `the stored response (with ${REPLAYED_HEADER}: true) instead of running it again.` +
      (options.fingerprint ? ' The same key with another request gets 422.' : ''),
    schema: { type: 'string', minLength: 1, maxLength: options.maxKeyLength },
  })(prototype, key, { value: handler });

  const responses: Record<string, ResponseEntry> = {
    ...(Reflect.getMetadata(DECORATORS.API_RESPONSE, handler) as Record<string, ResponseEntry>),
  };
  const success = Object.keys(responses).filter((status) => /^2\d\d$/.test(status));
  if (success.length === 0) {
    const status = successStatus(handler);
    responses[status] = { description: '' };
    success.push(String(status));
  }
  for (const status of success) {
    responses[status] = {
      ...responses[status],
      headers: { ...responses[status].headers, [REPLAYED_HEADER]: REPLAYED_HEADER_OBJECT },
    };
  }
  for (const [status, codes] of errorCodes(options)) {
    responses[status] ??= errorResponse(status, codes, options);
  }
  Reflect.defineMetadata(DECORATORS.API_RESPONSE, responses, handler);
}

/** The status Nest answers a successful request with, as @nestjs/swagger works it out. */
function successStatus(handler: object): number {
  const code = Reflect.getMetadata(HTTP_CODE_METADATA, handler) as number | undefined;
  if (code) return code;
  return Reflect.getMetadata(METHOD_METADATA, handler) === RequestMethod.POST ? 201 : 200;
}

/** The error codes this route can answer with, by HTTP status. */
function errorCodes(options: ResolvedIdempotencyOptions): Map<number, IdempotencyErrorCode[]> {
  const codes = new Map<number, IdempotencyErrorCode[]>();
  const possible = Object.values(IdempotencyErrorCode).filter(
    (code) =>
      (code !== IdempotencyErrorCode.KeyMissing || options.required) &&
      (code !== IdempotencyErrorCode.KeyReused || options.fingerprint) &&
      (code !== IdempotencyErrorCode.StoreUnavailable || !options.failOpen) &&
      // A misconfiguration (encryption keys), not something a client can act on.
      code !== IdempotencyErrorCode.RecordUnreadable,
  );
  for (const code of possible) {
    const status = IDEMPOTENCY_HTTP_STATUS[code];
    codes.set(status, [...(codes.get(status) ?? []), code]);
  }
  return codes;
}

const REPLAYED_HEADER_OBJECT = {
  description:
    '`true` when this is the stored response of an earlier request with the same idempotency ' +
    'key, replayed without running the operation again; absent otherwise.',
  schema: { type: 'string', enum: ['true'] },
};

const RETRY_AFTER_HEADER_OBJECT = {
  description: 'Seconds to wait before retrying.',
  schema: { type: 'integer', minimum: 1 },
};

const DESCRIPTIONS: Record<IdempotencyErrorCode, (options: ResolvedIdempotencyOptions) => string> =
  {
    [IdempotencyErrorCode.KeyMissing]: (o) => `no ${o.headerName} header`,
    [IdempotencyErrorCode.KeyInvalid]: (o) =>
      `the key is empty, over ${o.maxKeyLength} characters, not printable ASCII, or sent twice`,
    [IdempotencyErrorCode.InProgress]: () =>
      'a request with this key is still being processed; retry after Retry-After seconds',
    [IdempotencyErrorCode.KeyReused]: () =>
      'the key was already used with another request (method, path or body)',
    [IdempotencyErrorCode.StoreUnavailable]: () =>
      'the idempotency store is unavailable and nothing was processed; retry after Retry-After seconds',
    [IdempotencyErrorCode.RecordUnreadable]: () =>
      'the stored outcome for this key cannot be read (encryption keys) and nothing was processed',
  };

function errorResponse(
  status: number,
  codes: IdempotencyErrorCode[],
  options: ResolvedIdempotencyOptions,
): ResponseEntry {
  const description = codes.map((code) => `${code}: ${DESCRIPTIONS[code](options)}.`).join(' ');
  const code = { type: 'string', enum: codes };
  const [mediaType, schema] = options.problemDetails
    ? [
        'application/problem+json',
        {
          type: 'object',
          description: 'RFC 9457 problem details',
          required: ['type', 'title', 'status', 'detail', 'code'],
          properties: {
            type: { type: 'string', format: 'uri-reference' },
            title: { type: 'string', enum: codes.map((c) => IdempotencyErrorTitle[c]) },
            status: { type: 'integer', enum: [status] },
            detail: { type: 'string' },
            code,
          },
        },
      ]
    : [
        'application/json',
        {
          type: 'object',
          required: ['statusCode', 'error', 'code', 'message'],
          properties: {
            statusCode: { type: 'integer', enum: [status] },
            error: { type: 'string' },
            code,
            message: { type: 'string' },
          },
        },
      ];
  const retryAfter = codes.some(
    (c) => c === IdempotencyErrorCode.InProgress || c === IdempotencyErrorCode.StoreUnavailable,
  );
  return {
    description,
    content: { [mediaType]: { schema } },
    ...(retryAfter ? { headers: { 'Retry-After': RETRY_AFTER_HEADER_OBJECT } } : {}),
  };
}
