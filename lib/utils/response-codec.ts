import { StreamableFile } from '@nestjs/common';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import type { IdempotencyCompressionOptions } from '../interfaces/idempotency-options.interface';
import type { StoredResponse } from '../stores/idempotency.store';
import type { Sealing } from './encryption';

/** How a body was stored, so that a replay hands the framework the same kind of value. */
type BodyKind = 'json' | 'text' | 'binary' | 'view' | 'null' | 'empty';

/**
 * Typed arrays and DataView, by name: Fastify sends them as raw bytes, Express as JSON, so a
 * replay must hand the framework the same type again, not a Buffer.
 */
const VIEWS = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
} as const;
type ViewName = keyof typeof VIEWS;

type Algorithm = NonNullable<IdempotencyCompressionOptions['algorithm']>;

/** A response as the interceptor sees it: what the handler returned, plus status and headers. */
export interface ResponseSnapshot {
  /** Status code (HTTP); absent for RPC. */
  status?: number;
  /** Response headers to replay, lower-case names. */
  headers?: Record<string, string>;
  /** The handler's value; for an error, its `StoredError` (utils/error-codec). */
  value: unknown;
  /** The handler failed: `value` describes the error a replay throws (option `storeErrors`). */
  error?: boolean;
  /**
   * A decoded JSON body's text as stored: `value` serialised, which a replay may send as it is
   * rather than serialise `value` again (see `HttpContextAdapter.replay`).
   */
  json?: string;
}

/** What is stored beside the body, as short JSON. */
interface Meta {
  /** Status. */
  s?: number;
  /** Headers. */
  h?: Record<string, string>;
  /** Body kind: first letter of a {@link BodyKind}. */
  k: string;
  /** Compression algorithm of the body, when compressed. */
  z?: Algorithm;
  /** Kind `view`: the typed array (or DataView) the body's bytes came from. */
  a?: ViewName;
  /** 1 when the body is a stored error (see {@link ResponseSnapshot.error}). */
  e?: 1;
  /**
   * Sealed (option `encryption`): the id of the key that sealed it. Such a meta holds only `s`,
   * `e` and `x`; the rest is inside the sealed body (see `RecordCipher`).
   */
  x?: string;
}

/** A serialised response, before compression. */
export interface EncodedResponse {
  meta: Meta;
  body: Buffer;
}

/** What Express and Fastify send with a JSON body anyway: not worth storing with each record. */
const DEFAULT_JSON_TYPE = 'application/json; charset=utf-8';

const KINDS: Record<string, BodyKind> = {
  j: 'json',
  t: 'text',
  b: 'binary',
  v: 'view',
  n: 'null',
  e: 'empty',
};

const CODECS: Record<
  Algorithm,
  {
    compress: (body: Buffer, options: zlib.ZlibOptions | zlib.BrotliOptions) => Promise<Buffer>;
    decompress: (body: Buffer) => Promise<Buffer>;
    options: (level: number) => zlib.ZlibOptions | zlib.BrotliOptions;
    defaultLevel: number;
  }
> = {
  brotli: {
    compress: promisify(zlib.brotliCompress),
    decompress: promisify(zlib.brotliDecompress),
    options: (level) => ({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: level } }),
    defaultLevel: 5,
  },
  gzip: {
    compress: promisify(zlib.gzip),
    decompress: promisify(zlib.gunzip),
    options: (level) => ({ level }),
    defaultLevel: 6,
  },
  deflate: {
    compress: promisify(zlib.deflate),
    decompress: promisify(zlib.inflate),
    options: (level) => ({ level }),
    defaultLevel: 6,
  },
};

/** Why a value cannot be stored, or undefined when it can. */
export function unreplayableReason(value: unknown): string | undefined {
  if (value instanceof StreamableFile) return 'a StreamableFile';
  if (value === null || typeof value !== 'object') return undefined;
  // Node streams, and web streams and fetch Responses (Fastify streams both).
  const candidate = value as { pipe?: unknown; getReader?: unknown };
  if (typeof candidate.pipe === 'function' || typeof candidate.getReader === 'function') {
    return 'a stream';
  }
  if (typeof Response !== 'undefined' && value instanceof Response) return 'a fetch Response';
  return undefined;
}

/**
 * Serialises a response for the store. JSON bodies are kept as the JSON text the framework would
 * send, so a replay serialises to the same bytes. Throws when the value cannot be serialised.
 */
export function encodeResponse(snapshot: ResponseSnapshot): EncodedResponse {
  const { value } = snapshot;
  let kind: BodyKind;
  let body: Buffer;
  let view: ViewName | undefined;
  if (value === undefined || value === null) {
    kind = value === null ? 'null' : 'empty';
    body = Buffer.alloc(0);
  } else if (Buffer.isBuffer(value)) {
    kind = 'binary';
    body = value;
  } else if (ArrayBuffer.isView(value) && viewName(value)) {
    kind = 'view';
    view = viewName(value);
    body = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
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
  const meta: Meta = { k: kind[0] };
  if (view) meta.a = view;
  if (snapshot.error) meta.e = 1;
  if (snapshot.status !== undefined) meta.s = snapshot.status;
  const headers = { ...snapshot.headers };
  if (kind === 'json' && headers['content-type'] === DEFAULT_JSON_TYPE) {
    delete headers['content-type'];
  }
  if (Object.keys(headers).length > 0) meta.h = headers;
  return { meta, body };
}

/**
 * The stored form of an encoded response: the body compressed (off the event loop, in libuv's
 * thread pool) when compression is on, it has at least `threshold` bytes and it gets smaller,
 * then sealed with `sealing` (option `encryption`; compressed first, since ciphertext does not
 * compress). Compression is an optimisation: a body it fails on is stored as it is.
 */
export function packResponse(
  encoded: EncodedResponse,
  compression: false | IdempotencyCompressionOptions,
  sealing?: Sealing,
): StoredResponse | Promise<StoredResponse> {
  const { meta, body } = encoded;
  if (compression && body.length > 0 && body.length >= (compression.threshold ?? 1024)) {
    const packed = compress(encoded, compression);
    return sealing ? packed.then((stored) => seal(stored, meta, sealing)) : packed;
  }
  // Small bodies (most responses) are stored as they are, without a promise.
  const stored = { meta: JSON.stringify(meta), body };
  return sealing ? seal(stored, meta, sealing) : stored;
}

/** `stored` sealed, with only the status and the error flag of `meta` left readable. */
function seal(stored: StoredResponse, meta: Meta, { cipher, context }: Sealing): StoredResponse {
  const readable: Partial<Meta> = {};
  if (meta.s !== undefined) readable.s = meta.s;
  if (meta.e !== undefined) readable.e = meta.e;
  return cipher.seal(stored.meta, stored.body, readable, context);
}

async function compress(
  { meta, body }: EncodedResponse,
  compression: IdempotencyCompressionOptions,
): Promise<StoredResponse> {
  const algorithm = compression.algorithm ?? 'brotli';
  const codec = CODECS[algorithm];
  const packed = await codec
    .compress(body, codec.options(compression.level ?? codec.defaultLevel))
    .catch(() => body);
  if (packed.length >= body.length) return { meta: JSON.stringify(meta), body };
  return { meta: JSON.stringify({ ...meta, z: algorithm }), body: packed };
}

/**
 * Parsed metas by their text: a route's responses mostly share one (`{"s":201,"k":"j"}`), so a
 * replay need not parse it again. Short ones only, at most 512, cleared when full; frozen, since
 * every replay with that meta shares the object.
 */
const metas = new Map<string, Meta>();
const MAX_METAS = 512;
const MAX_CACHED_META = 256;

function parseMeta(text: string): Meta {
  let meta = metas.get(text);
  if (meta === undefined) {
    meta = JSON.parse(text) as Meta;
    if (text.length > MAX_CACHED_META) return meta;
    if (meta.h) Object.freeze(meta.h);
    if (metas.size >= MAX_METAS) metas.clear();
    metas.set(text, Object.freeze(meta));
  }
  return meta;
}

/**
 * Decodes a stored response back into status, headers and the value to hand the framework,
 * opening it with `sealing` when it was sealed. Throws (or rejects, for a compressed body) when
 * the record is not one this codec wrote, or is sealed and cannot be opened, or is not sealed
 * while `sealing` says it must be (a plaintext record planted in an encrypting app's store).
 */
export function decodeResponse(
  stored: StoredResponse,
  sealing?: Sealing,
): ResponseSnapshot | Promise<ResponseSnapshot> {
  let meta = parseMeta(stored.meta);
  let body = stored.body;
  if (meta.x !== undefined || sealing) {
    if (!sealing) throw new Error('the record is encrypted and no encryption keys are set');
    if (meta.x === undefined) throw new Error('the record is not encrypted');
    const opened = sealing.cipher.open(stored.meta, meta.x, body, sealing.context);
    meta = parseMeta(opened.meta);
    body = opened.body;
  }
  if (meta.z === undefined) return snapshotOf(meta, body);
  const codec = CODECS[meta.z];
  if (!codec) throw new Error(`unknown compression ${String(meta.z)}`);
  return codec.decompress(body).then((plain) => snapshotOf(meta, plain));
}

function snapshotOf(meta: Meta, body: Buffer): ResponseSnapshot {
  let value: unknown;
  let json: string | undefined;
  switch (KINDS[meta.k]) {
    case 'json':
      json = body.toString('utf8');
      // Parsed all the same: a body that is not JSON (altered in the store) is refused.
      value = JSON.parse(json);
      break;
    case 'text':
      value = body.toString('utf8');
      break;
    case 'binary':
      value = body;
      break;
    case 'view':
      value = toView(body, meta.a);
      break;
    case 'null':
      value = null;
      break;
    default:
      value = undefined;
  }
  return meta.e === 1
    ? { status: meta.s, headers: meta.h, value, error: true }
    : { status: meta.s, headers: meta.h, value, json };
}

/** The HTTP status and whether it is an error, from a stored meta alone (operators' reports). */
export function describeMeta(meta: string): { status?: number; error: boolean } {
  const parsed = parseMeta(meta);
  return { status: parsed.s, error: parsed.e === 1 };
}

/** The name of a typed array or DataView this codec stores as bytes, or undefined. */
function viewName(value: ArrayBufferView): ViewName | undefined {
  const name = value.constructor.name as ViewName;
  return VIEWS[name] === value.constructor ? name : undefined;
}

/** The typed array (or DataView) `name` over a copy of the bytes (a copy keeps it aligned). */
function toView(body: Buffer, name: ViewName | undefined): ArrayBufferView {
  const View = (name !== undefined && Object.hasOwn(VIEWS, name) ? VIEWS[name] : undefined) as
    (new (buffer: ArrayBuffer) => ArrayBufferView) | undefined;
  if (!View) throw new Error(`unknown stored view type ${String(name)}`);
  const bytes = new Uint8Array(body.byteLength);
  bytes.set(body);
  return new View(bytes.buffer);
}
