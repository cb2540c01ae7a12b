import { Logger } from '@nestjs/common';
import { describe } from '../../core/outcome-events';
import type {
  IdempotencyRunKey,
  IdempotencyRunOptions,
} from '../../interfaces/idempotency-run-options.interface';
import {
  assertKnownNames,
  namesOf,
  type OptionNames,
  ownOptions,
  resolveRunOptions,
  RUN_OPTION_NAMES,
} from '../../options';
import type { IdempotencyService } from '../../services/idempotency.service';
import {
  keyOf,
  messageGroup,
  type SqsKeyReader,
  type SqsKeySource,
  type SqsMessage,
  sqsKeyReader,
} from './sqs-message';

/**
 * Options of `@IdempotentSqsMessage()` and {@link idempotentSqsHandler}: where the key comes
 * from, and every option of `IdempotencyService.run()` (the message's work runs through it), with
 * the fingerprint a function of the message.
 */
export interface IdempotentSqsOptions extends Omit<IdempotencyRunOptions, 'fingerprint'> {
  /**
   * Where each message's key comes from (see {@link SqsKeySource}): a dotted path into its JSON
   * body (`'paymentId'`), `{ attribute: name }`, or a function of the message. Default: none, so
   * the key is the `MessageId`, which stops SQS's redeliveries only: a producer that retries a
   * send creates a new MessageId for the same payment. A message without a key at `key` is keyed
   * by its MessageId, with a warning.
   */
  key?: SqsKeySource;
  /**
   * What identifies the work, from the message (its body, say): a later message with the same
   * key and another fingerprint fails with `IdempotencyKeyReusedError` (it stays on the queue,
   * and goes to the dead-letter queue once `maxReceiveCount` runs out). Default: none.
   */
  fingerprint?: (message: SqsMessage) => unknown;
}

/** The names {@link IdempotentSqsOptions} takes: run()'s, with `key` and `fingerprint`. */
const SQS_OPTION_NAMES: OptionNames = {
  known: namesOf<IdempotentSqsOptions>({
    key: true,
    fingerprint: true,
    scope: true,
    onConflict: true,
    waitTimeout: true,
    lockTtl: true,
    ttl: true,
    storeErrors: true,
    transactional: true,
    resumable: true,
  }),
  elsewhere: RUN_OPTION_NAMES.elsewhere,
};

/**
 * An `sqs-consumer` handler for one message or a batch (see {@link idempotentSqsHandler}).
 * Called with one message (`handleMessage`), it resolves with nothing, so the message is deleted;
 * with an array (`handleMessageBatch`), it resolves with the messages to delete.
 */
export interface IdempotentSqsHandler<M extends SqsMessage> {
  (message: M): Promise<void>;
  (messages: M[]): Promise<M[]>;
}

/**
 * Runs SQS messages through `IdempotencyService.run()`, one record per key. What sqs-consumer (11)
 * does with a handler's result decides what is deleted, so that is what this returns: nothing
 * for a single message that completed (an object would leave it undeleted), and for a batch the
 * messages that completed, never throwing (a batch handler that throws fails every message of
 * the batch, and with no `error` listener kills the process).
 */
export class SqsMessageRunner<M extends SqsMessage> {
  private readonly logger = new Logger('Idempotency');
  private readonly read: SqsKeyReader;
  private readonly hasSource: boolean;
  private readonly fingerprint?: (message: SqsMessage) => unknown;
  private readonly runOptions: IdempotencyRunOptions;
  private warnedFallback = false;

  /**
   * @param where what option errors start with, e.g. `'@IdempotentSqsMessage()'`
   * @param defaultScope the scope when the options set none
   * @throws TypeError for options run() would refuse, and a key that is not a source
   */
  constructor(options: IdempotentSqsOptions, where: string, defaultScope?: string) {
    const own = ownOptions(options, SQS_OPTION_NAMES);
    assertKnownNames(own, SQS_OPTION_NAMES, where);
    const { key, fingerprint, ...runOptions } = own;
    this.read = sqsKeyReader(key, where);
    this.hasSource = key !== undefined;
    if (fingerprint !== undefined && typeof fingerprint !== 'function') {
      throw new TypeError(`${where}: fingerprint must be a function of the message`);
    }
    this.fingerprint = fingerprint;
    runOptions.scope ??= defaultScope;
    resolveRunOptions(runOptions, where);
    this.runOptions = runOptions;
  }

  /** The scope the messages' records are in. */
  get scope(): string | undefined {
    return this.runOptions.scope;
  }

  /** Handles what sqs-consumer passed: one message, or a batch. */
  handle(
    service: IdempotencyService,
    input: M | M[],
    work: (message: M) => unknown,
  ): Promise<void | M[]> {
    if (Array.isArray(input)) return this.batch(service, input, work);
    return this.one(service, input, work);
  }

  /**
   * Runs a message's work once per key. A duplicate of a message still running waits for its
   * outcome (`onConflict: 'wait'`, up to `waitTimeout`); past that it throws, and the message
   * stays on the queue for a later delivery. Resolves once the outcome is stored.
   */
  private async one(service: IdempotencyService, message: M, work: (message: M) => unknown) {
    const { key, fallback } = keyOf(message, this.read, this.hasSource);
    if (fallback && !this.warnedFallback) {
      this.warnedFallback = true;
      this.logger.warn(
        `${this.scope}: message ${message.MessageId} has no key where the ` +
          'option `key` says: keyed by its MessageId, which a producer retrying the send changes',
      );
    }
    // The result is not kept: what sqs-consumer does with it is delete or not, and a value that
    // cannot be stored would release the key and let a duplicate run the work again.
    await service.run(
      key as IdempotencyRunKey,
      async () => {
        await work(message);
      },
      { ...this.runOptions, fingerprint: this.fingerprint?.(message) },
    );
  }

  /**
   * Runs a batch: messages of one FIFO group one after the other (a group stops at its first
   * failure, so that none runs out of order), the others concurrently. Resolves with the
   * messages that completed or were done before; the rest stay on the queue.
   */
  private async batch(
    service: IdempotencyService,
    messages: M[],
    work: (message: M) => unknown,
  ): Promise<M[]> {
    const lanes: M[][] = [];
    const groups = new Map<string, M[]>();
    for (const message of messages) {
      const group = messageGroup(message);
      if (group === undefined) lanes.push([message]);
      else if (groups.has(group)) groups.get(group)!.push(message);
      else groups.set(group, [message]);
    }
    lanes.push(...groups.values());
    const done = new Set<M>();
    await Promise.all(
      lanes.map(async (lane) => {
        for (const [index, message] of lane.entries()) {
          try {
            await this.one(service, message, work);
            done.add(message);
          } catch (error) {
            const held = lane.length - index - 1;
            this.logger.warn(
              `${this.scope}: message ${message.MessageId} failed ` +
                `(${describe(error)}); left on the queue for a later delivery` +
                (held > 0 ? `, with the ${held} after it in its message group` : ''),
            );
            return;
          }
        }
      }),
    );
    // One entry per MessageId, the last received (its receipt handle is the newest): a batch
    // that holds a message twice (its visibility ran out while the receive waited) would
    // otherwise fail sqs-consumer's DeleteMessageBatch (BatchEntryIdsNotDistinct).
    const deleted = new Map<string | undefined, M>();
    for (const message of messages) if (done.has(message)) deleted.set(message.MessageId, message);
    return [...deleted.values()];
  }
}

/**
 * Makes an `sqs-consumer` handler (`handleMessage` or `handleMessageBatch`) run each message's
 * work once per key, through `IdempotencyService.run()`: for apps that create their consumers
 * themselves. With `@ssut/nestjs-sqs`, use `@IdempotentSqsMessage()` on the handler method.
 *
 * @param handle the work for one message; its result is not kept
 * @param options the key's source and run()'s options, with `scope` required: the queue's or
 *   handler's name, so that two handlers (two queues keyed by ids of their own) never share
 *   records (a refund with a payment's id would be deleted as its replay)
 * @throws TypeError at once for options run() would refuse, or without `scope`
 *
 * @example
 * ```ts
 * Consumer.create({
 *   queueUrl,
 *   batchSize: 10,
 *   handleMessageBatch: idempotentSqsHandler(idempotency, (message) => charge(message), {
 *     key: 'paymentId',
 *     scope: 'payments',
 *   }),
 * });
 * ```
 */
export function idempotentSqsHandler<M extends SqsMessage>(
  idempotency: IdempotencyService,
  handle: (message: M) => unknown,
  options: IdempotentSqsOptions & { scope: string },
): IdempotentSqsHandler<M> {
  const own =
    typeof options === 'object' && options !== null
      ? ownOptions(options, SQS_OPTION_NAMES)
      : undefined;
  if (typeof own?.scope !== 'string' || own.scope === '') {
    throw new TypeError(
      "idempotentSqsHandler: options.scope is required (the queue's or the handler's name, e.g. " +
        "'payments'): two handlers with the same scope share their records",
    );
  }
  const runner = new SqsMessageRunner<M>(own, 'idempotentSqsHandler');
  return ((input: M | M[]) => runner.handle(idempotency, input, handle)) as IdempotentSqsHandler<M>;
}
