import type { ExecutionContext, Logger } from '@nestjs/common';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import type { StoredResponse } from '../stores/idempotency.store';
import type { RecordCipher } from '../utils/encryption';
import { matchesStoredErrors } from '../utils/error-codec';
import { encodeResponse, packResponse, type ResponseSnapshot } from '../utils/response-codec';
import { describe, type OutcomeEvents } from './outcome-events';
import { isPromise } from '../interceptors/request-identity';
import type { GlobalSerializers } from '../interceptors/serializers';
import type { Claim, StoreCalls } from './store-calls';

/** Writes a completion inside the app's transaction; resolves whether the claim still owned it. */
export type CompletionWrite = (claim: Claim, response: StoredResponse) => Promise<boolean>;

/**
 * What became of an outcome: stored; refused because the claim no longer owned the key
 * (fenced); released because it cannot be stored; or lost because the store failed.
 */
export type RecordOutcome = 'stored' | 'fenced' | 'released' | 'failed';

/**
 * Records a handler's outcome under its claim: what it emitted, as the client is sent it (after
 * the global serializers), or an error the route's `storeErrors` match. Anything that cannot be
 * stored releases the claim, so a retry runs the handler again rather than finding nothing.
 */
export class OutcomeRecorder {
  constructor(
    private readonly serializers: GlobalSerializers,
    private readonly calls: StoreCalls,
    private readonly events: OutcomeEvents,
    private readonly logger: Logger,
    /** Seals what is stored (option `encryption`). */
    private readonly cipher?: RecordCipher,
  ) {}

  /**
   * Stores what the handler emitted (or releases the claim when it cannot be stored). With
   * `write` (a transaction's), a failed write is thrown, so that the transaction rolls back, and
   * the caller settles the rest once the transaction did: it releases what was not stored, and
   * reports the completion ({@link committed}) only after the commit.
   */
  async success(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    claim: Claim,
    values: unknown[],
    write?: CompletionWrite,
  ): Promise<RecordOutcome> {
    let snapshot;
    try {
      let sent = this.serializers.apply(context, values);
      if (isPromise(sent)) sent = await sent;
      snapshot = adapter.capture(context, sent, claim.options);
    } catch (error) {
      const reason = `the response cannot be serialised (${describe(error)})`;
      return this.notReplayable(claim, 'unserialisable', reason, !write);
    }
    if (typeof snapshot === 'string') {
      return this.notReplayable(claim, snapshot, `the response is ${snapshot}`, !write);
    }
    return this.store(claim, snapshot, write);
  }

  /**
   * Stores the handler's error when the route's `storeErrors` match it, so that a retry gets it
   * again. @returns false when they do not (the caller releases the claim).
   */
  async error(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    claim: Claim,
    error: unknown,
  ): Promise<boolean> {
    const { storeErrors } = claim.options;
    if (storeErrors.length === 0) return false;
    if (!matchesStoredErrors(storeErrors, error, context, adapter.errorStatus(error))) return false;
    await this.store(claim, adapter.captureError(context, error, claim.options));
    return true;
  }

  private async store(
    claim: Claim,
    snapshot: ResponseSnapshot,
    write?: CompletionWrite,
  ): Promise<RecordOutcome> {
    const { options, handler, key } = claim;
    let encoded;
    try {
      encoded = encodeResponse(snapshot);
    } catch (error) {
      const reason = `the response cannot be serialised (${describe(error)})`;
      return this.notReplayable(claim, 'unserialisable', reason, !write);
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

  /** Reports a stored outcome (after the commit, with a transaction's write). */
  committed(claim: Claim): void {
    this.events.emit(claim, 'completed', claim.key);
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
