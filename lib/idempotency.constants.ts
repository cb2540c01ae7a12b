/** Injection token of the resolved module options ({@link ResolvedIdempotencyOptions}). */
export const IDEMPOTENCY_OPTIONS = Symbol('IDEMPOTENCY_OPTIONS');

/** Header added to every replayed response. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Name of the outcome header with `statusHeader: true`. */
export const STATUS_HEADER = 'Idempotency-Status';

/** Response headers replayed by default; `Set-Cookie` can never be added. */
export const DEFAULT_REPLAY_HEADERS = [
  'content-type',
  'content-language',
  'content-disposition',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'cache-control',
  'expires',
  'link',
  'vary',
];

/** Headers that are never stored or replayed, whatever the configuration says. */
export const FORBIDDEN_REPLAY_HEADERS = [
  'set-cookie',
  'authorization',
  'cookie',
  'proxy-authorization',
  'www-authenticate',
  'proxy-authenticate',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
];
