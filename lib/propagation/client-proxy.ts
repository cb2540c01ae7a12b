import { PAYLOAD_KEY_FIELD } from '../adapters/rpc-context.adapter';
import { loadOptional } from '../utils/load-optional';
import { isPropagating, propagatedKey } from './derived-key';
import { PROPAGATED_HEADER } from './fetch';

/** The parts of the `nats` package's MsgHdrs used here. */
interface NatsHeaders {
  has(name: string): boolean;
  set(name: string, value: string): void;
  keys(): string[];
  values(name: string): string[];
  append(name: string, value: string): void;
}

type RecordClass<T> = new (data: unknown, options?: T) => { data: unknown; options?: T };

/** The parts of `@nestjs/microservices` used here. */
interface Microservices {
  ClientProxy: { prototype: ClientMethods };
  ClientNats: abstract new (...args: never[]) => object;
  ClientRMQ: abstract new (...args: never[]) => object;
  NatsRecord: new (
    data: unknown,
    headers?: NatsHeaders,
  ) => { data: unknown; headers?: NatsHeaders };
  RmqRecord: RecordClass<{ headers?: { [name: string]: unknown } }>;
}

interface ClientMethods {
  send(pattern: unknown, data: unknown): unknown;
  emit(pattern: unknown, data: unknown): unknown;
}

let installed = false;

/**
 * Wraps `ClientProxy.send` and `emit` once, the first time a module or route with `propagateKeys`
 * boots (when the app has `@nestjs/microservices`): a message sent inside a propagating handler
 * carries a derived key where `@Idempotent()` on the receiving side reads it. NATS and RabbitMQ
 * get an `Idempotency-Key` header (the payload is sent as it is); TCP, Redis, MQTT and other
 * transports without per-message headers get an `idempotencyKey` field in an object payload.
 * A message that already carries a key keeps it. The label is `send <pattern>` or
 * `emit <pattern>`, with an ordinal from the second message on (see {@link propagatedKey}).
 */
export function propagateThroughClientProxy(): void {
  if (installed) return;
  const nest = loadOptional<Microservices>('@nestjs/microservices');
  if (!nest) return;
  installed = true;
  const proto = nest.ClientProxy.prototype;
  for (const kind of ['send', 'emit'] as const) {
    const original = proto[kind];
    proto[kind] = function (this: object, pattern: unknown, data: unknown) {
      if (!isPropagating() || pattern == null || data == null) {
        return original.call(this, pattern, data);
      }
      return original.call(
        this,
        pattern,
        withKey(nest, this, `${kind} ${patternText(pattern)}`, data),
      );
    };
  }
}

/** The message `data`, carrying a derived key for `label` unless it carries one already. */
function withKey(nest: Microservices, client: object, label: string, data: unknown): unknown {
  if (client instanceof nest.ClientRMQ) {
    const record = data instanceof nest.RmqRecord ? data : undefined;
    const headers = record?.options?.headers ?? {};
    if (hasHeader(Object.keys(headers))) return data;
    const key = propagatedKey(label);
    return new nest.RmqRecord(record ? record.data : data, {
      ...record?.options,
      headers: { ...headers, [PROPAGATED_HEADER]: key },
    });
  }
  if (client instanceof nest.ClientNats) {
    const record = data instanceof nest.NatsRecord ? data : undefined;
    if (record?.headers && hasHeader(record.headers.keys())) return data;
    const headers = natsHeaders(record?.headers);
    if (!headers) return withPayloadKey(label, data);
    headers.set(PROPAGATED_HEADER, propagatedKey(label)!);
    return new nest.NatsRecord(record ? record.data : data, headers);
  }
  return withPayloadKey(label, data);
}

/** An object payload with an `idempotencyKey` field; other payloads cannot carry one. */
function withPayloadKey(label: string, data: unknown): unknown {
  if (typeof data !== 'object' || data === null || Array.isArray(data) || Buffer.isBuffer(data)) {
    return data;
  }
  // A payload with its own toJSON is serialised by it: a field added here would be dropped.
  if (typeof (data as { toJSON?: unknown }).toJSON === 'function') return data;
  // An MqttRecord (or any record) wraps the payload: the field goes into what it wraps.
  const wrapped = data as { data?: unknown; options?: unknown };
  if (data.constructor?.name === 'MqttRecord') {
    const inner = withPayloadKey(label, wrapped.data);
    if (inner === wrapped.data) return data;
    const Record = data.constructor as new (data: unknown, options: unknown) => unknown;
    return new Record(inner, wrapped.options);
  }
  if (PAYLOAD_KEY_FIELD in data) return data;
  return { ...data, [PAYLOAD_KEY_FIELD]: propagatedKey(label) };
}

/** Whether a list of header names holds the key header (in any case). */
function hasHeader(names: string[]): boolean {
  const wanted = PROPAGATED_HEADER.toLowerCase();
  return names.some((name) => name.toLowerCase() === wanted);
}

/** A copy of a NATS message's headers (a new set when none), from the NATS client library. */
function natsHeaders(from: NatsHeaders | undefined): NatsHeaders | undefined {
  let nats: { headers(): NatsHeaders } | undefined;
  try {
    // NestJS 12's ClientNats uses @nats-io/transport-node, NestJS 11's the `nats` package.
    nats = loadOptional('@nats-io/transport-node') ?? loadOptional('nats');
  } catch {
    // A client library that cannot be loaded here: the key goes into the payload instead.
  }
  if (!nats) return undefined;
  const copy = nats.headers();
  for (const name of from?.keys() ?? []) {
    for (const value of from!.values(name)) copy.append(name, value);
  }
  return copy;
}

/** A message pattern as text: a string as it is, an object pattern as JSON. */
function patternText(pattern: unknown): string {
  return typeof pattern === 'string' ? pattern : JSON.stringify(pattern);
}
