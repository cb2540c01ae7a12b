import { propagatedKey, isPropagating } from './derived-key';

/** The header a propagated key travels in: what payment providers and `@Idempotent()` read. */
export const PROPAGATED_HEADER = 'Idempotency-Key';

/** Methods that change nothing (RFC 9110 safe methods): their requests get no key. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** Whether a request with `method` (any case) may change something, and so gets a key. */
export function isUnsafeMethod(method: string | undefined): boolean {
  return !SAFE_METHODS.has((method ?? 'GET').toUpperCase());
}

/** The label of an HTTP call: `<METHOD> <origin><path>` (no query, no fragment). */
export function httpLabel(method: string, url: URL): string {
  return `${method.toUpperCase()} ${url.origin}${url.pathname}`;
}

/** What `fetch` takes as its first argument (a URL, its text or a Request). */
type FetchInput = Parameters<typeof globalThis.fetch>[0];

let installed = false;

/**
 * Wraps the global `fetch` once, the first time a module or route with `propagateKeys` boots:
 * a non-safe request made inside a propagating handler gets `Idempotency-Key` unless it sets one
 * itself. Anywhere else the wrapper calls the original at once, so that apps and routes that do
 * not ask pay one AsyncLocalStorage lookup per fetch, and apps that never ask pay nothing.
 */
export function propagateThroughFetch(): void {
  if (installed || typeof globalThis.fetch !== 'function') return;
  installed = true;
  const original = globalThis.fetch;
  const fetchWithKey = function fetch(input: FetchInput, init?: RequestInit) {
    if (!isPropagating()) return original(input, init);
    const request = input instanceof Request ? input : undefined;
    const method = init?.method ?? request?.method ?? 'GET';
    if (!isUnsafeMethod(method)) return original(input, init);
    const headers = new Headers(init?.headers ?? request?.headers);
    if (headers.has(PROPAGATED_HEADER)) return original(input, init);
    const url = parseUrl(request ? request.url : String(input));
    if (!url) return original(input, init); // fetch rejects it as it would have
    headers.set(PROPAGATED_HEADER, propagatedKey(httpLabel(method, url))!);
    return original(input, { ...init, headers });
  };
  globalThis.fetch = fetchWithKey as typeof fetch;
}

/** `text` as an absolute URL, or undefined (URL.parse() is Node 22+). */
export function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}
