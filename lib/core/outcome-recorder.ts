import type { ExecutionContext, Logger } from '@nestjs/common';
import {
  IdempotencyErrorCode,
  IdempotencyRecordUnreadableError,
} from '../errors/idempotency.errors';
import type { StoredResponse } from '../stores/idempotency.store';
import type { RecordCipher } from '../utils/encryption';
import { matchesStoredErrors } from '../utils/error-codec';
import { isPromise } from '../utils/is-promise';
import {
  decodeResponse,
  encodeResponse,
  packResponse,
  type ResponseSnapshot,
} from '../utils/response-codec';
import { describe, type OutcomeEvents } from './outcome-events';
import type { Claim, StoreCalls } from './store-calls';

/** Writes a completion inside the app's transaction; resolves whether the claim still owned it. */
export type CompletionWrite = (claim: Claim, response: StoredResponse) => Promise<boolean>;

/**
 * What became of an outcome: stored; refused because the claim no longer owned the key
 * (fenced); released because it cannot be stored; or lost because the store failed.
 */
export type RecordOutcome = 'stored' | 'fenced' | 'released' | 'failed';

/** What to store of a success: a snapshot, or why it cannot be stored (`'a stream'`). */
export type Captured = ResponseSnapshot | string;

/** How an entry point's errors are matched against `storeErrors` and captured. */
export interface ErrorCapture {
  /** Handed to `storeErrors` predicates; none for `run()`. */
  context?: ExecutionContext;
  /** The status `storeErrors` statuses match an error by, or undefined where there are none. */
  errorStatus(error: unknown): number | undefined;
  /** What to store of an error `storeErrors` matched. */
  captureError(error: unknown): ResponseSnapshot;
}

/**
 * Records outcomes under their claims, and opens them again for a replay: encoding, the size
 * limit, compression and sealing (option `encryption`) happen here, for every entry point.
 * Anything that cannot be stored releases the claim, so a retry runs the work again rather than
 * finding nothing.
 */
export class OutcomeRecorder {
  constructor(
    private readonly calls: StoreCalls,
    private readonly events: OutcomeEvents,
    private readonly logger: Logger,
    /** Seals what is stored (option `encryption`). */
    private readonly cipher?: RecordCipher,
  ) {}

  /**
   * Stores a success, as `capture` describes it (or releases the claim when it cannot be
   * stored: `capture` throws, or says why, or it is too large). With `write` (a
   * transaction's), a failed write is thrown, so that the transaction rolls back, and the caller
   * settles the rest once the transaction did: it releases what was not stored, and reports the
   * completion ({@link committed}) only after the commit.
   */
  async success(
    claim: Claim,
    capture: () => Captured | PromiseLike<Captured>,
    write?: CompletionWrite,
  ): Promise<RecordOutcome> {
    let captured;
    try {
      captured = capture();
      if (isPromise(captured)) captured = await captured;
    } catch (error) {
      return this.unserialisable(claim, error, !write);
    }
    if (typeof captured === 'string') {
      return this.notReplayable(claim, captured, `the response is ${captured}`, !write);
    }
    const { options, key } = claim;
    let encoded;
    try {
      encoded = encodeResponse(captured);
    } catch (error) {
      return this.unserialisable(claim, error, !write);
    }
    if (encoded.body.length > options.maxResponseBytes) {
      return this.notReplayable(
        claim,
        'too large',
        `the response has ${encoded.body.length} bytes, over maxResponseBytes (${options.maxResponseBytes})`,
        !write,
      );
    }
    const sealing = this.cipher && { cipher: this.cipher, context: key };
    let response = packResponse(encoded, options.compression, sealing);
    if (isPromise(response)) response = await response;
    return this.write(claim, response, write);
  }

  /**
   * Stores an error when `storeErrors` match it, so that a retry gets it again.
   * @returns false when they do not (the caller releases the claim).
   */
  async error(claim: Claim, error: unknown, capture: ErrorCapture): Promise<boolean> {
    const { storeErrors } = claim.options;
    if (storeErrors.length === 0) return false;
    const status = capture.errorStatus(error);
    if (!matchesStoredErrors(storeErrors, error, capture.context as never, status)) return false;
    await this.success(claim, () => capture.captureError(error));
    return true;
  }

  /** Reports a stored outcome (after the commit, with a transaction's write). */
  committed(claim: Claim): void {
    this.events.emit(claim, 'completed', claim.key);
  }

  /**
   * A stored outcome, opened and decoded. One that cannot be (sealed with a key no longer set,
   * plaintext while encryption is on, altered) is refused with
   * `IDEMPOTENCY_RECORD_UNREADABLE`, logged once per route: never replayed as garbage, and the
   * work, which ran already, is not run again.
   */
  async open(claim: Claim, stored: StoredResponse): Promise<ResponseSnapshot> {
    try {
      const sealing = this.cipher && { cipher: this.cipher, context: claim.key };
      const snapshot = decodeResponse(stored, sealing);
      return isPromise(snapshot) ? await snapshot : snapshot;
    } catch (error) {
      this.events.warnOnce(
        claim.handler,
        `a stored outcome cannot be read (${describe(error)}); refused with ` +
          `${IdempotencyErrorCode.RecordUnreadable} (check encryption.keys)`,
        'unreadable',
      );
      throw new IdempotencyRecordUnreadableError({ cause: error });
    }
  }

  /** An outcome that could not be worked out (a serializer or encoder threw). */
  private unserialisable(claim: Claim, error: unknown, release: boolean): Promise<'released'> {
    const reason = `the response cannot be serialised (${describe(error)})`;
    return this.notReplayable(claim, 'unserialisable', reason, release);
  }

  private async write(
    claim: Claim,
    response: StoredResponse,
    write?: CompletionWrite,
  ): Promise<RecordOutcome> {
    const { handler, key } = claim;
    let owned: boolean;
    try {
      owned = await (write ?? this.calls.complete.bind(this.calls))(claim, response);
    } catch (error) {
      this.events.emit(claim, 'completion_failed', key, error);
      if (write) throw error; // the app's transaction rolls back: nothing it wrote commits
      this.logger.error(
        `${handler}: the handler succeeded but storing its response for ${key} failed (${describe(error)}); a retry after the lease may run it again`,
      );
      return 'failed';
    }
    if (owned) {
      if (!write) this.committed(claim);
      return 'stored';
    }
    this.events.emit(claim, 'fenced', key);
    this.logger.warn(
      write
        ? `${handler}: the handler outlived its lease on ${key}; its transaction is rolled back (fenced)`
        : `${handler}: the handler outlived its lease on ${key}; its response was sent but not stored (fenced)`,
    );
    return 'fenced';
  }

  /**
   * `kind`: what went wrong, without the details of this response (it is warned about once).
   * `release`: give up the claim now (the caller does, after rolling its transaction back).
   */
  private async notReplayable(
    claim: Claim,
    kind: string,
    reason: string,
    release: boolean,
  ): Promise<'released'> {
    this.events.emit(claim, 'not_replayable', claim.key);
    const then = release ? 'the claim was released' : 'the transaction was rolled back';
    this.events.warnOnce(claim.handler, `not stored because ${reason}; ${then}`, kind);
    if (release) await this.calls.release(claim);
    return 'released';
  }
}
