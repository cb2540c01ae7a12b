import { ExecutionContext, HttpException, IntrinsicException } from '@nestjs/common';
import { defer, Observable, of } from 'rxjs';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { errorStatus, type StoredError } from '../utils/error-codec';
import { fingerprint } from '../utils/fingerprint';
import { loadPeer } from '../utils/load-optional';
import { requestPrincipal } from '../utils/principal';
import type { ResponseSnapshot } from '../utils/response-codec';
import type { IdempotencyContextAdapter } from './context-adapter';
import { captureError, captureValue, replayValue } from './value-outcome';

/** The parts of graphql-js's GraphQLResolveInfo used here. */
interface ResolveInfo {
  fieldName: string;
  parentType: { name: string };
  schema: { getMutationType(): { name: string } | null | undefined };
}

/** What Apollo (`{ req }`, Express) and Mercurius (`{ req }`, Fastify, via Nest) pass as context. */
interface GraphqlContext {
  req?: {
    headers?: Record<string, string | string[] | undefined>;
    rawHeaders?: string[];
    /** Fastify: Node's request. */
    raw?: { rawHeaders?: string[] };
  };
}

type GraphQLErrorClass = new (
  message: string,
  options?: { extensions?: Record<string, unknown> },
) => Error & { extensions?: Record<string, unknown> };

/**
 * GraphQL mutations (`@nestjs/graphql`, Apollo or Mercurius, code-first or schema-first). Each
 * field is its own route: its record is keyed by the mutation field, so two idempotent mutations
 * in one document, under one header key, each run once. The key is the GraphQL request's HTTP
 * header; the fingerprint the field and its arguments (variables resolved). What the resolver
 * returned is stored (Dates and bigints tagged), not what was sent, so field resolvers and
 * scalars below a replayed field serialise it as the first time. Refusals are GraphQLErrors with
 * `extensions.code`, which leave the operation's other fields alone.
 */
export class GraphqlContextAdapter implements IdempotencyContextAdapter {
  private readonly GraphQLError: GraphQLErrorClass;

  constructor() {
    // Loaded here, not at import: apps without GraphQL need not install it.
    this.GraphQLError = loadPeer<{ GraphQLError: GraphQLErrorClass }>(
      'graphql',
      'making GraphQL mutations idempotent',
    ).GraphQLError;
  }

  /** Queries, subscriptions and field resolvers of an idempotent resolver class pass untouched. */
  bypass(context: ExecutionContext): boolean {
    const info = infoOf(context);
    return info?.parentType?.name !== info?.schema?.getMutationType?.()?.name;
  }

  unsupported(): undefined {
    return undefined;
  }

  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown {
    const request = contextOf(context).req;
    const name = options.headerName.toLowerCase();
    const value = request?.headers?.[name];
    // Node joins repeated headers with ", ": a key sent twice comes back as an array, refused.
    if (typeof value === 'string' && value.includes(',')) {
      const raw = request?.rawHeaders ?? request?.raw?.rawHeaders ?? [];
      const count = raw.filter((header, i) => i % 2 === 0 && header.toLowerCase() === name);
      if (count.length > 1) return [value];
    }
    return value;
  }

  principal(context: ExecutionContext): unknown {
    return requestPrincipal(contextOf(context).req);
  }

  fingerprint(context: ExecutionContext): string {
    return fingerprint(this.target(context), context.getArgByIndex(1));
  }

  target(context: ExecutionContext): string[] {
    const info = infoOf(context);
    return ['graphql', `${info.parentType.name}.${info.fieldName}`];
  }

  /** `graphql Mutation.createOrder`: the schema's field, which one resolver method serves. */
  routePattern(context: ExecutionContext): string {
    return this.target(context).join(' ');
  }

  capture(_context: ExecutionContext, values: unknown[]): ResponseSnapshot | string {
    // Nest resolves a resolver's Observable to its last value.
    return captureValue(values[values.length - 1]);
  }

  captureError(
    _context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot {
    const snapshot = captureError(error, 'http', options.storeErrors);
    const extensions = (error as { extensions?: unknown } | null)?.extensions;
    if (!(error instanceof HttpException) && error instanceof this.GraphQLError) {
      if (extensions && typeof extensions === 'object') {
        (snapshot.value as StoredError).r = { ...extensions };
      }
    }
    return snapshot;
  }

  /** An HttpException's status, for `storeErrors` statuses; none for other errors. */
  errorStatus(error: unknown): number | undefined {
    return error instanceof HttpException ? errorStatus(error) : undefined;
  }

  replay(
    _context: ExecutionContext,
    snapshot: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown> {
    return defer(() =>
      of(
        replayValue(snapshot, options.storeErrors, (stored, status) =>
          status === undefined
            ? new this.GraphQLError(stored.m, { extensions: stored.r as Record<string, unknown> })
            : new HttpException(stored.r as string | object, status),
        ),
      ),
    );
  }

  /**
   * A refusal, which graphql-js reports as a GraphQLError carrying its `extensions` (`code`,
   * `retryAfter` in seconds). An IntrinsicException: a client's mistake (no key, a reused key) is
   * answered, not logged by Nest as a server error with a stack trace, as over HTTP.
   */
  toException(_context: ExecutionContext, error: IdempotencyError): Error {
    const extensions: Record<string, unknown> = { code: error.code };
    if (error.retryAfterMs !== undefined) {
      extensions.retryAfter = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
    }
    return new GraphqlRefusal(error.message, extensions);
  }
}

/** See {@link GraphqlContextAdapter.toException}. */
class GraphqlRefusal extends IntrinsicException {
  constructor(
    message: string,
    /** Copied by graphql-js onto the GraphQLError it reports (`locatedError`). */
    readonly extensions: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'GraphQLError';
  }
}

/** The resolver's `info` (Nest's resolver arguments: root, args, context, info). */
function infoOf(context: ExecutionContext): ResolveInfo {
  return context.getArgByIndex<ResolveInfo>(3);
}

function contextOf(context: ExecutionContext): GraphqlContext {
  return context.getArgByIndex<GraphqlContext | undefined>(2) ?? {};
}
