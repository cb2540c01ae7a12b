import type { IdempotencyRunKey } from '../../interfaces/idempotency-run-options.interface';
import { parseDottedPath, valueAtPath } from '../../utils/dotted-path';

/**
 * The parts of an SQS message (`Message` of `@aws-sdk/client-sqs`, as `sqs-consumer` and
 * `@ssut/nestjs-sqs` hand it to a handler) read here. Written out, so that this package needs
 * neither of them installed, even for its types.
 */
export interface SqsMessage {
  /** Given by SQS to each message sent: a producer that sends again gets a new one. */
  MessageId?: string;
  Body?: string;
  /** Message attributes the consumer asked for (`messageAttributeNames`). */
  MessageAttributes?: Record<
    string,
    { DataType?: string; StringValue?: string; BinaryValue?: Uint8Array }
  >;
  /** System attributes the consumer asked for (`attributeNames`), e.g. `MessageGroupId`. */
  Attributes?: Partial<Record<string, string>>;
}

/**
 * Where a message's idempotency key comes from:
 * - a dotted path into its JSON body (`'paymentId'`, `'payment.id'`): the business id the
 *   producer put in it, the same on every send of the same operation;
 * - `{ attribute: name }`: a message attribute, which the consumer must ask for
 *   (`messageAttributeNames`): a String or Number attribute's text, a Binary one's bytes in
 *   base64, never a lossy UTF-8 decoding;
 * - a function of the message, for anything else (a system attribute, a header in the body).
 */
export type SqsKeySource =
  string | { attribute: string } | ((message: SqsMessage) => IdempotencyRunKey | undefined | null);

/** A key source, checked once, turned into a function of the message. */
export type SqsKeyReader = (message: SqsMessage) => unknown;

/**
 * The function reading a message's key from `source`; undefined for no source (the MessageId is
 * then the key). Throws a TypeError for a source that is none of the forms above.
 */
export function sqsKeyReader(source: SqsKeySource | undefined, where: string): SqsKeyReader {
  if (source === undefined) return () => undefined;
  if (typeof source === 'function') return source;
  if (typeof source === 'string') {
    const steps = parseDottedPath(source, `${where}: key`, 'payment.id');
    return (message) => valueAtPath(parseBody(message), steps);
  }
  const name = (source as { attribute?: unknown } | null)?.attribute;
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(
      `${where}: key must be a dotted path into the body ('paymentId'), { attribute: name } or ` +
        'a function of the message',
    );
  }
  return (message) => {
    const attribute = message.MessageAttributes?.[name];
    if (!attribute) return undefined;
    if (attribute.StringValue !== undefined) return attribute.StringValue;
    return attribute.BinaryValue && binaryKey(attribute.BinaryValue);
  };
}

/**
 * The key of a Binary attribute: its bytes in base64 (as `kafkaMessageKey` keys a Buffer). A
 * UTF-8 decoding would turn every byte sequence that is not valid UTF-8 into the same
 * replacement character, so two ids (16-byte UUIDs) would share one key, and the second
 * message would be deleted as the first's replay, its work never run.
 */
function binaryKey(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}

/**
 * The idempotency key of an SQS message, read from `source` (see {@link SqsKeySource}). Without a
 * source, or when the message has none there, its `MessageId`: that protects against SQS's own
 * redeliveries only, since a producer that retries a send creates a new MessageId for the same
 * operation. Pass it to `IdempotencyService.run()`, which refuses a key that is not a string or
 * an integer.
 *
 * @example
 * ```ts
 * await idempotency.run(sqsMessageKey(message, 'paymentId'), () => charge(message));
 * ```
 */
export function sqsMessageKey(message: SqsMessage, source?: SqsKeySource): unknown {
  return keyOf(message, sqsKeyReader(source, 'sqsMessageKey'), source !== undefined).key;
}

/** The key of a message, and whether it is its MessageId for want of one from the source. */
export function keyOf(
  message: SqsMessage,
  read: SqsKeyReader,
  hasSource: boolean,
): { key: unknown; fallback: boolean } {
  const key = read(message);
  if (key !== undefined && key !== null) return { key, fallback: false };
  if (!message.MessageId) {
    throw new TypeError('an SQS message without its key and without a MessageId');
  }
  return { key: message.MessageId, fallback: hasSource };
}

/** The body as JSON, or undefined when it is not JSON (its key is then not there). */
function parseBody(message: SqsMessage): unknown {
  if (message.Body === undefined) return undefined;
  try {
    return JSON.parse(message.Body);
  } catch {
    return undefined;
  }
}

/**
 * The FIFO message group of a message, when the consumer asked for it
 * (`attributeNames: ['MessageGroupId']`): messages of one group run in order.
 */
export function messageGroup(message: SqsMessage): string | undefined {
  return message.Attributes?.MessageGroupId;
}
