import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The cookie of the double-submit token: a random secret the confirmation page sets, HttpOnly
 * and SameSite=Strict, so another site can neither read it nor have a browser send it.
 */
export const CSRF_COOKIE = 'idempotency_page_csrf';

/** How long a confirmation stays valid, in seconds (the cookie's Max-Age). */
const CONFIRM_SECONDS = 15 * 60;

const SECRET = /^[A-Za-z0-9_-]{43}$/;

/** The page's secret from the request's cookies, when it holds a well-formed one. */
export function secretFromCookies(header: string | string[] | undefined): string | undefined {
  const text = Array.isArray(header) ? header.join('; ') : (header ?? '');
  for (const part of text.split(';')) {
    const [name, value] = part.trim().split('=');
    if (name === CSRF_COOKIE && value !== undefined && SECRET.test(value)) return value;
  }
  return undefined;
}

/** A new secret for {@link CSRF_COOKIE}. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** The `Set-Cookie` value that keeps `secret` for the page's path. */
export function secretCookie(secret: string, path: string, secure: boolean): string {
  const flags = `Path=${path}; Max-Age=${CONFIRM_SECONDS}; HttpOnly; SameSite=Strict`;
  return `${CSRF_COOKIE}=${secret}; ${flags}${secure ? '; Secure' : ''}`;
}

/**
 * The form's token for deleting `ref`: bound to the cookie's secret and to the record, so a
 * token seen for one record deletes no other, and a token without the cookie deletes nothing.
 */
export function deleteToken(secret: string, ref: string): string {
  return createHmac('sha256', secret).update(`delete\n${ref}`).digest('base64url');
}

/** Whether `token` is the one {@link deleteToken} gives for this secret and record. */
export function tokenMatches(secret: string | undefined, ref: string, token: unknown): boolean {
  if (secret === undefined || typeof token !== 'string') return false;
  const expected = Buffer.from(deleteToken(secret, ref));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Why a POST does not come from the page itself, or undefined when it may. Browsers say where a
 * request comes from: `Sec-Fetch-Site` (every current browser), else `Origin` (its host must be
 * the request's `Host`). A client that sends neither is no browser a site could drive, and still
 * needs the token.
 */
export function crossSiteProblem(headers: Record<string, unknown>): string | undefined {
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') {
    return site === 'same-origin' ? undefined : `the form was sent from another site (${site})`;
  }
  const origin = headers['origin'];
  if (typeof origin !== 'string') return undefined;
  let host: string | undefined;
  try {
    host = new URL(origin).host;
  } catch {
    host = undefined;
  }
  return host !== undefined && host === headers['host']
    ? undefined
    : 'the form was sent from another origin';
}
