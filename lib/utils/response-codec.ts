import { StreamableFile } from '@nestjs/common';
import type { StoredResponse } from '../stores/idempotency.store';

/** How a body was stored, so that a replay hands the framework the same kind of value. */
type BodyKind = 'json' | 'text' | 'binary' | 'empty';

/** A response as the interceptor sees it: what the handler returned, plus status and headers. */
export interface ResponseSnapshot {
  /** Status code (HTTP); absent for RPC. */
  status?: number;
  /** Response headers to replay, lower-case names. */
  headers?: Record<string, string>;
  /** The handler's value. */
  value: unknown;
}

interface Meta {
  /** Status. */
  s?: number;
  /** Headers. */
  h?: Record<string, string>;
  /** Body kind. */
  k: BodyKind;
}

/** Why a value cannot be stored, or undefined when it can. */
export function unreplayableReason(value: unknown): string | undefined {
  if (value instanceof StreamableFile) return 'a StreamableFile';
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { pipe?: unknown }).pipe === 'function'
  ) {
    return 'a stream';
  }
  return undefined;
}

/**
 * Encodes a response for the store. JSON bodies are kept as the JSON text the framework would
 * send, so a replay serialises to the same bytes. Throws when the value cannot be serialised.
 */
export function encodeResponse(snapshot: ResponseSnapshot): StoredResponse {
  const { value } = snapshot;
  let kind: BodyKind;
  let body: Buffer;
  if (value === undefined) {
    kind = 'empty';
    body = Buffer.alloc(0);
  } else if (Buffer.isBuffer(value)) {
    kind = 'binary';
    body = value;
  } else if (typeof value === 'string') {
    kind = 'text';
    body = Buffer.from(value, 'utf8');
  } else {
    const json = JSON.stringify(value);
    // An object whose toJSON() returns a primitive (a Date, a Decimal) would replay as a bare
    // string, which frameworks send as text rather than JSON: not the same response.
    if (json !== undefined && typeof value === 'object' && json[0] !== '{' && json[0] !== '[') {
      throw new TypeError('an object that serialises to a JSON primitive');
    }
    kind = json === undefined ? 'empty' : 'json';
    body = Buffer.from(json ?? '', 'utf8');
  }
  const meta: Meta = { k: kind };
  if (snapshot.status !== undefined) meta.s = snapshot.status;
  if (snapshot.headers && Object.keys(snapshot.headers).length > 0) meta.h = snapshot.headers;
  return { meta: JSON.stringify(meta), body };
}

/** Decodes a stored response back into status, headers and the value to hand the framework. */
export function decodeResponse(stored: StoredResponse): ResponseSnapshot {
  const meta = JSON.parse(stored.meta) as Meta;
  let value: unknown;
  switch (meta.k) {
    case 'json':
      value = JSON.parse(stored.body.toString('utf8'));
      break;
    case 'text':
      value = stored.body.toString('utf8');
      break;
    case 'binary':
      value = stored.body;
      break;
    default:
      value = undefined;
  }
  return { status: meta.s, headers: meta.h, value };
}
