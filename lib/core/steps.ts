import type { Logger } from '@nestjs/common';
import {
  IdempotencyErrorCode,
  type IdempotencyError,
  IdempotencyInProgressError,
  IdempotencyRecordUnreadableError,
  IdempotencyStepMismatchError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import type { IdempotencyStepOptions } from '../interfaces/idempotency-run-options.interface';
import { checkStepOptions } from '../options/run-options';
import {
  type ClaimContext,
  currentClaim,
  inStepContext,
  isUnclaimedRun,
} from '../propagation/claim-context';
import type { StoredResponse, StoredStep } from '../stores/idempotency.store';
import type { RecordCipher, Sealing } from '../utils/encryption';
import { isPromise } from '../utils/is-promise';
import {
  decodeResponse,
  encodeResponse,
  packResponse,
  unreplayableReason,
} from '../utils/response-codec';
import { decodeValue, encodeValue } from '../utils/value-codec';
import { describe, type OutcomeEvents } from './outcome-events';
import type { Claim, StoreCalls } from './store-calls';
import { stepStoreProblem } from './step-store-checks';
import type { Transactions } from './transactions';

/**
 * A step whose result cannot be recorded (a stream, a function, over maxResponseBytes): the
 * request fails, and a retry runs the step again. Never stored as the request's outcome
 * (`storeErrors`): it says the handler's code must change, not what the request comes to.
 */
export class StepNotRecordedError extends Error {}

/** Longest step name, in characters: names are stored with every step record. */
export const MAX_STEP_NAME = 200;

/** What every resumable run of one claim core shares. */
export interface StepTools {
  calls: StoreCalls;
  events: OutcomeEvents;
  logger: Logger;
  /** Seals step results (option `encryption`). */
  cipher?: RecordCipher;
  transactions: Transactions;
  /** What a refused step tells its caller to wait, in ms (Retry-After). */
  retryAfterMs: number;
}

/** Why a run's step was refused, which the run answers whatever the handler did with it. */
export interface StepRefusal {
  error: IdempotencyError;
  /** Whether the claim is given up (not when it was fenced: the key is another run's then). */
  release: boolean;
}

/**
 * `IdempotencyService.step()`: finds the resumable run the caller is in (its async context) and
 * runs the step there. Rejects, naming what is missing, outside one, and inside another step.
 */
export async function runStep<T>(
  name: string,
  fn: () => T | Promise<T>,
  options?: IdempotencyStepOptions,
): Promise<Awaited<T>> {
  const shown = typeof name === 'string' ? JSON.stringify(name) : typeof name;
  const where = `IdempotencyService.step(${shown})`;
  if (!storableName(name)) {
    throw new TypeError(
      `${where}: the name must be a string of 1 to ${MAX_STEP_NAME} characters, well-formed ` +
        'Unicode without NUL (every store must keep it as it is, or a retry could not find it)',
    );
  }
  if (typeof fn !== 'function') throw new TypeError(`${where}: fn must be a function`);
  const checked = checkStepOptions(options, where);
  const context = currentClaim();
  // A resumable route's request without a claim runs unprotected: its steps are plain calls.
  if (!context && isUnclaimedRun()) return await fn();
  if (!context) {
    throw new Error(
      `${where} runs only inside a resumable handler (@Idempotent({ resumable: true })) or ` +
        'run() with `resumable: true`, and this code runs in neither: a handler without ' +
        '@Idempotent(), or code outside any request and run()',
    );
  }
  if (!context.steps) {
    throw new Error(
      `${where}: this claimed handler is not resumable; set \`resumable: true\` in its ` +
        '@Idempotent() (or in the options of run() or @IdempotentMethod())',
    );
  }
  if (context.step) {
    throw new Error(
      `${where} was called inside step ${JSON.stringify(context.step.name)}: steps do not ` +
        'nest; call it after that step returns, or make its work part of that step',
    );
  }
  return context.steps.run(context, name, fn, checked);
}

/**
 * The steps of one resumable run under its claim: what earlier runs of the request recorded,
 * returned in place of running those steps again, and the steps this run records, each fenced
 * by the owner token. Steps are numbered in the order step() is called (synchronously, at the
 * call), so steps started together (`Promise.all`) get the same numbers on every run.
 */
export class ClaimSteps {
  /** Steps earlier runs recorded, by index. */
  private readonly recorded = new Map<number, StoredStep>();
  /** The index of the next step() call. */
  private next = 0;
  /** The steps in flight, each settled (never rejecting) once its step has. */
  private readonly running = new Set<Promise<void>>();
  /** The run recorded a step, or resumed from some: its completion deletes the key's steps. */
  touched: boolean;
  /** Set once a step was refused: later steps are refused at once, and the run answers it. */
  refusal?: StepRefusal;
  /** Set once a step met another name: the run's later steps cannot be trusted either. */
  private mismatched?: IdempotencyStepMismatchError;

  constructor(
    private readonly tools: StepTools,
    private readonly claim: Claim,
    recorded: StoredStep[] = [],
  ) {
    for (const step of recorded) this.recorded.set(step.index, step);
    this.touched = this.recorded.size > 0;
  }

  /**
   * One step() call, in the run's context `context` (see {@link runStep}). Tracked until it
   * settles (see {@link idle}).
   */
  run<T>(
    context: ClaimContext,
    name: string,
    fn: () => T | Promise<T>,
    options: IdempotencyStepOptions,
  ): Promise<Awaited<T>> {
    const step = this.runOnce(context, name, fn, options);
    const settled = step.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(settled);
    void settled.then(() => this.running.delete(settled));
    return step;
  }

  /**
   * Resolves once no step of the run is in flight. The run waits for it before its outcome is
   * recorded or its claim released: a step started beside one that failed (`Promise.all`) still
   * runs, and its effect must be recorded, and never run by a retry alongside it.
   */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
  }

  private async runOnce<T>(
    context: ClaimContext,
    name: string,
    fn: () => T | Promise<T>,
    options: IdempotencyStepOptions,
  ): Promise<Awaited<T>> {
    const index = this.next++;
    if (this.refusal) throw this.refusal.error;
    if (this.mismatched) throw this.mismatched;
    const found = this.recorded.get(index);
    if (found) {
      if (found.name !== name) throw this.mismatch(index, found.name, name);
      return (await this.open(index, found)) as Awaited<T>;
    }
    const transactional = options.transactional ?? this.claim.options.transactional;
    const problem = stepStoreProblem(this.tools.calls.store, transactional);
    if (problem) throw new TypeError(`${this.claim.handler}: ${problem}`);
    const step = async (): Promise<Awaited<T>> => await inStepContext(context, index, name, fn);
    if (!transactional) {
      const result = await step();
      await this.record(index, name, result);
      return result;
    }
    // The step's writes and its record commit together, or roll back together: a refused
    // record (fenced) or a failed one throws here, inside the transaction.
    const host = this.tools.transactions.host(transactional);
    return host.withTransaction(async (): Promise<Awaited<T>> => {
      const result = await step();
      await this.record(index, name, result, host.tx);
      return result;
    });
  }

  /** Records a step's result under the claim; throws when it cannot. */
  private async record(index: number, name: string, value: unknown, tx?: unknown): Promise<void> {
    const { claim } = this;
    const { calls, events, logger, retryAfterMs } = this.tools;
    const step: StoredStep = { index, name, result: await this.encode(index, name, value) };
    let owned: boolean;
    try {
      owned = await (tx === undefined
        ? calls.recordStep(claim, step)
        : calls.recordStepInTransaction(tx, claim, step));
    } catch (error) {
      events.emit(claim, 'store_error', claim.key, error);
      logger.error(
        `${claim.handler}: recording step ${index} (${name}) of ${claim.key} failed ` +
          `(${describe(error)}); the request fails (503) and a retry runs the step again`,
      );
      const message =
        'The idempotency store is unavailable: a step of this request ran and could not be ' +
        'recorded; a retry resumes before it.';
      const unavailable = new IdempotencyStoreUnavailableError(retryAfterMs, {
        cause: error,
        message,
      });
      throw this.refuse(unavailable, true);
    }
    if (!owned) {
      // Another run took the key over (this one stalled past its lease): it resumes from the
      // steps recorded before, so this run must stop rather than record what it goes on doing.
      events.emit(claim, 'fenced', claim.key);
      logger.warn(
        `${claim.handler}: lost its lease on ${claim.key} before step ${index} (${name}) was ` +
          `recorded (fenced)${tx === undefined ? '' : '; its transaction is rolled back'}`,
      );
      throw this.refuse(new IdempotencyInProgressError(retryAfterMs), false);
    }
    this.touched = true;
    events.emit(claim, 'step_recorded', claim.key);
  }

  /** A step's result as the store keeps it: encoded, compressed and sealed as run()'s are. */
  private async encode(index: number, name: string, value: unknown): Promise<StoredResponse> {
    const { options, handler } = this.claim;
    const unstorable = (reason: string) => {
      this.tools.events.emit(this.claim, 'not_replayable', this.claim.key);
      return new StepNotRecordedError(
        `${handler}: step ${index} (${name}) ran, but its result cannot be recorded: ${reason}. ` +
          'What the step did stands (its writes roll back if it is transactional); the ' +
          'request fails, and a retry runs the step again',
      );
    };
    const reason = unreplayableReason(value);
    if (reason) throw unstorable(`it is ${reason}`);
    let encoded;
    try {
      encoded = encodeResponse({ value: encodeValue(value) });
    } catch (error) {
      throw unstorable(`it is not storable as data (${describe(error)})`);
    }
    if (encoded.body.length > options.maxResponseBytes) {
      throw unstorable(
        `it has ${encoded.body.length} bytes, over maxResponseBytes (${options.maxResponseBytes})`,
      );
    }
    const packed = packResponse(encoded, options.compression, this.sealing(index));
    return isPromise(packed) ? await packed : packed;
  }

  /** A recorded step's result, decoded. One that cannot be opened refuses the run (500). */
  private async open(index: number, step: StoredStep): Promise<unknown> {
    const { claim } = this;
    let value: unknown;
    try {
      const decoded = decodeResponse(step.result, this.sealing(index));
      const snapshot = isPromise(decoded) ? await decoded : decoded;
      value = decodeValue(snapshot.value as string);
    } catch (error) {
      this.tools.events.warnOnce(
        claim.handler,
        `a recorded step cannot be read (${describe(error)}); refused with ` +
          `${IdempotencyErrorCode.RecordUnreadable} (check encryption.keys)`,
        'unreadable-step',
      );
      throw this.refuse(new IdempotencyRecordUnreadableError({ cause: error }), true);
    }
    this.tools.events.emit(claim, 'step_replayed', claim.key);
    return value;
  }

  /**
   * Sealing bound to the record and the step's place (option `encryption`): a step record copied
   * to another key or another index does not open.
   */
  private sealing(index: number): Sealing | undefined {
    const { cipher } = this.tools;
    return cipher && { cipher, context: `${this.claim.key}\0step\0${index}` };
  }

  private mismatch(index: number, recorded: string, called: string): Error {
    this.mismatched = new IdempotencyStepMismatchError(this.claim.handler, index, recorded, called);
    this.tools.logger.error(this.mismatched.message);
    return this.mismatched;
  }

  private refuse(error: IdempotencyError, release: boolean): IdempotencyError {
    this.refusal ??= { error, release };
    return this.refusal.error;
  }
}

/**
 * Whether every store keeps `name` as it is: PostgreSQL's text holds no NUL, and UTF-8 (every
 * store's) turns a lone surrogate into U+FFFD, so a retry would meet another name.
 */
function storableName(name: unknown): name is string {
  return (
    typeof name === 'string' &&
    name !== '' &&
    name.length <= MAX_STEP_NAME &&
    !name.includes('\0') &&
    (name as string & { isWellFormed(): boolean }).isWellFormed()
  );
}
