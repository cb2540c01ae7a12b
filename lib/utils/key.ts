import { hash as sha256 } from 'node:crypto';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';

/** Printable ASCII (space to tilde): what an RFC 8941 sf-string may hold. */
const PRINTABLE = /^[\x20-\x7e]*$/;
/** A bare (unquoted) key: printable ASCII but `"`, `,`, `;` and `\`, which would be syntax. */
const BARE = /^[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;
/** An RFC 8941 parameter key, and the bare items a parameter value may be but a string. */
const PARAMETER_KEY = /[a-z*][a-z0-9_.*-]*/y;
const BARE_ITEM =
  /(?:-?\d{1,12}\.\d{1,3}|-?\d{1,15}|[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*|:[A-Za-z0-9+/=]*:|\?[01])/y;

const invalid = (message: string) => new IdempotencyKeyInvalidError(message);

/**
 * Validates a client's key. Printable ASCII, 1 to `maxLength` characters, surrounding spaces
 * ignored. With `header`, it is the `Idempotency-Key` header, which the IETF draft defines as an
 * RFC 8941 Item holding an sf-string: `"abc"` is the key `abc` (only `\"` and `\\` are escapes,
 * the closing quote is required), parameters after it (`"abc";p=1`) are checked and ignored, and
 * anything else after it (a list, `"a", "b"`) is refused. A bare key (`abc`, a UUID: what most
 * clients send) is accepted too, without the characters that would make it a list or carry
 * parameters (`"`, `,`, `;`, `\`). Values from the `key` option or an RPC message are taken as
 * they are (printable ASCII, trimmed), and a safe integer (a number or bigint, an `eventId`
 * column) as its decimal form. Throws {@link IdempotencyKeyInvalidError}.
 */
export function parseIdempotencyKey(raw: unknown, maxLength: number, header = false): string {
  if (Array.isArray(raw)) throw invalid('Send exactly one idempotency key.');
  // An id column or a broker's message number: the integer's decimal form is the key.
  if ((typeof raw === 'number' && Number.isSafeInteger(raw)) || typeof raw === 'bigint') {
    raw = String(raw);
  }
  if (typeof raw !== 'string') {
    throw invalid(`The idempotency key must be a string or an integer, not ${describeValue(raw)}.`);
  }
  if (!PRINTABLE.test(raw)) {
    throw invalid('The idempotency key may only contain printable ASCII characters.');
  }
  let key = raw.trim();
  if (header && key.startsWith('"')) {
    key = parseItem(key);
  } else if (header && key !== '' && !BARE.test(key)) {
    throw invalid(
      "An unquoted idempotency key may not contain '\"', ',', ';' or '\\' " +
        '(one key per request; quote it as an RFC 8941 string to send these).',
    );
  }
  if (key.length === 0) throw invalid('The idempotency key must not be empty.');
  if (key.length > maxLength) {
    throw invalid(`The idempotency key must be at most ${maxLength} characters long.`);
  }
  return key;
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return `the number ${value}`;
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** An RFC 8941 Item whose bare item is an sf-string: the string, its parameters checked. */
function parseItem(text: string): string {
  const [key, end] = readString(text, 0);
  let i = end;
  while (i < text.length) {
    if (text[i] !== ';') throw invalid('Send exactly one idempotency key, as one quoted string.');
    i++;
    while (text[i] === ' ') i++;
    i = match(PARAMETER_KEY, text, i);
    if (text[i] !== '=') continue; // a parameter without value is the boolean true
    i++;
    if (text[i] === '"') {
      i = readString(text, i)[1];
    } else {
      i = match(BARE_ITEM, text, i);
    }
  }
  return key;
}

/** The index after what the sticky `pattern` matches at `text[start]`. */
function match(pattern: RegExp, text: string, start: number): number {
  pattern.lastIndex = start;
  if (!pattern.test(text)) throw invalid('The idempotency key has a malformed parameter.');
  return pattern.lastIndex;
}

/** The sf-string starting at `text[start]` (a quote), unescaped, and the index after it. */
function readString(text: string, start: number): [string, number] {
  let out = '';
  for (let i = start + 1; i < text.length; i++) {
    const char = text[i];
    if (char === '"') return [out, i + 1];
    if (char === '\\') {
      const next = text[++i];
      if (next !== '"' && next !== '\\') {
        throw invalid('The quoted idempotency key has an invalid escape.');
      }
      out += next;
    } else {
      out += char;
    }
  }
  throw invalid('The quoted idempotency key has no closing quote.');
}

/** A byte UTF-8 never holds: it sets apart the hashes of text that UTF-8 cannot encode. */
const NOT_UTF8 = Buffer.from([0xff]);

/**
 * SHA-256 of `text` in base64url, cut to 22 characters. UTF-8 turns every lone surrogate into
 * U+FFFD, so two such strings would share a hash: text that is not well formed is hashed as its
 * UTF-16 code units instead, after a byte that never starts (or appears in) UTF-8.
 */
export function digest(text: string): string {
  // One-shot hashing is several times faster than createHash() for inputs this small.
  // String.prototype.isWellFormed: Node 20+, ES2024 (the compiler targets ES2022 types).
  const input = (text as string & { isWellFormed(): boolean }).isWellFormed()
    ? text
    : Buffer.concat([NOT_UTF8, Buffer.from(text, 'utf16le')]);
  return sha256('sha256', input, 'base64url').slice(0, 22);
}
