/** Stable codes carried by every error this package raises (HTTP bodies, RPC errors, events). */
export const IdempotencyErrorCode = {
  KeyMissing: 'IDEMPOTENCY_KEY_MISSING',
  KeyInvalid: 'IDEMPOTENCY_KEY_INVALID',
  InProgress: 'IDEMPOTENCY_IN_PROGRESS',
  KeyReused: 'IDEMPOTENCY_KEY_REUSED',
  StoreUnavailable: 'IDEMPOTENCY_STORE_UNAVAILABLE',
  RecordUnreadable: 'IDEMPOTENCY_RECORD_UNREADABLE',
} as const;

/** One of {@link IdempotencyErrorCode}. */
export type IdempotencyErrorCode = (typeof IdempotencyErrorCode)[keyof typeof IdempotencyErrorCode];

/**
 * Base of the transport-neutral errors; the context adapter maps each one to an HttpException
 * (400, 409, 422, 503) or, for microservices, an RpcException.
 */
export abstract class IdempotencyError extends Error {
  abstract readonly code: IdempotencyErrorCode;
  /** When set, how long the client should wait before retrying, in milliseconds. */
  readonly retryAfterMs?: number;

  /**
   * Whether the same request may succeed later (in progress, store unavailable): redeliver it.
   * Otherwise (key missing, invalid or reused) it never will: drop or dead-letter it.
   */
  get retryable(): boolean {
    return this.retryAfterMs !== undefined;
  }
}

/** The route requires an idempotency key and the request has none. */
export class IdempotencyKeyMissingError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.KeyMissing;
  constructor(headerName: string) {
    super(`This handler requires an idempotency key (${headerName}).`);
  }
}

/** The idempotency key is empty, too long, or holds characters that are not printable ASCII. */
export class IdempotencyKeyInvalidError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.KeyInvalid;
}

/** Another request with the same key is still running. */
export class IdempotencyInProgressError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.InProgress;
  constructor(override readonly retryAfterMs: number) {
    super(
      'A request with this idempotency key is still being processed; retry after it completes.',
    );
  }
}

/** The key was used before with a different request (method, path or body). */
export class IdempotencyKeyReusedError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.KeyReused;
  constructor() {
    super('This idempotency key was already used with a different request payload.');
  }
}

/** The store could not be reached in time; nothing ran (fail closed). */
export class IdempotencyStoreUnavailableError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.StoreUnavailable;
  constructor(
    override readonly retryAfterMs: number,
    options?: { cause?: unknown },
  ) {
    super('The idempotency store is unavailable; the request was not processed.', options);
  }
}

/**
 * The key's stored outcome cannot be read: sealed with a key no longer in `encryption.keys`,
 * stored in plaintext while encryption is on (or sealed while it is off), or altered. The
 * handler is not run again (it ran once already) and nothing is replayed (fail closed): 500.
 */
export class IdempotencyRecordUnreadableError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.RecordUnreadable;
  constructor(options?: { cause?: unknown }) {
    super(
      'The stored outcome for this idempotency key cannot be read; the request was not processed again.',
      options,
    );
  }
}

/**
 * A short, human-readable summary of each error code: the same for every occurrence (the RFC 9457
 * problem `title`; the occurrence's own explanation is the error's message).
 */
export const IdempotencyErrorTitle: Record<IdempotencyErrorCode, string> = {
  [IdempotencyErrorCode.KeyMissing]: 'Idempotency key missing',
  [IdempotencyErrorCode.KeyInvalid]: 'Invalid idempotency key',
  [IdempotencyErrorCode.InProgress]: 'Request with this idempotency key in progress',
  [IdempotencyErrorCode.KeyReused]: 'Idempotency key reused with another request',
  [IdempotencyErrorCode.StoreUnavailable]: 'Idempotency store unavailable',
  [IdempotencyErrorCode.RecordUnreadable]: 'Idempotency record unreadable',
};
