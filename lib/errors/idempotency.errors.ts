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

/**
 * The store could not be reached in time: nothing ran (fail closed), or, for a step of a
 * resumable handler, the step ran and could not be recorded (`message` says so).
 */
export class IdempotencyStoreUnavailableError extends IdempotencyError {
  readonly code = IdempotencyErrorCode.StoreUnavailable;
  constructor(
    override readonly retryAfterMs: number,
    options?: { cause?: unknown; message?: string },
  ) {
    super(
      options?.message ?? 'The idempotency store is unavailable; the request was not processed.',
      options,
    );
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
 * A resumable handler met, at a place in its order of steps, a step recorded by an earlier run
 * of the same request under another name: the code changed between that run and this one (a
 * step added, removed, renamed or moved). Nothing is skipped or run again silently: the handler
 * fails with this error (500 on HTTP, logged), its claim is released and its recorded steps
 * stay, so every retry fails the same way until the record is deleted
 * (`IdempotencyRecords.delete`) or its steps expire (`ttl`). Not a refusal of the request: no
 * `onReject`, and `storeErrors` never stores it. See docs/steps.md.
 */
export class IdempotencyStepMismatchError extends Error {
  /** Stable code, as docs/errors.md lists it. */
  readonly code = 'IDEMPOTENCY_STEP_MISMATCH';

  /**
   * @param handler the route (`Controller.method`) or run() scope
   * @param index the step's place in the handler's order of steps, from 0
   * @param recorded the name recorded at that place by an earlier run
   * @param called the name this run called step() with there
   */
  constructor(
    handler: string,
    readonly index: number,
    readonly recorded: string,
    readonly called: string,
  ) {
    super(
      `${handler}: step ${index} was recorded as ${JSON.stringify(recorded)} by an earlier run ` +
        `of this request, and this run calls it ${JSON.stringify(called)}: the code changed ` +
        'between the two runs. Nothing was skipped or run again; delete the record ' +
        '(IdempotencyRecords.delete) to run the request from its first step (see docs/steps.md)',
    );
    this.name = 'IdempotencyStepMismatchError';
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
