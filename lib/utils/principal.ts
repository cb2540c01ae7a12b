/**
 * Properties of an authenticated principal (`request.user`) that identify it, in the order they
 * are tried. Stable ones only: a token, `iat` or `exp` changes on every refresh, and a retry after
 * a refresh must still find its record.
 */
export const PRINCIPAL_ID_FIELDS = ['id', 'sub', 'userId', '_id'] as const;

/**
 * The authenticated principal of an HTTP request, or undefined: `request.user`, else
 * `request.raw.user`. On Fastify, a Nest middleware gets the raw Node request, so a middleware that
 * sets `req.user` (as Passport's does) sets it there, not on the Fastify request that guards,
 * interceptors and handlers see; reading one place only would find no principal and share the
 * caller's records with every other caller. Adapters of other entry points (GraphQL's request
 * in its context) read it the same way.
 */
export function requestPrincipal(request: unknown): unknown {
  if (typeof request !== 'object' || request === null) return undefined;
  const { user, raw } = request as { user?: unknown; raw?: { user?: unknown } | null };
  if (user !== undefined && user !== null) return user;
  return typeof raw === 'object' && raw !== null && raw !== request ? raw.user : user;
}

/**
 * Thrown when a request carries a principal that none of {@link PRINCIPAL_ID_FIELDS} identifies:
 * scoping it globally instead would let its records be replayed to other callers. A server
 * misconfiguration (Nest answers 500 and logs it), never a client error.
 */
export class IdempotencyScopeError extends Error {
  constructor(handler: string, from: 'principal' | 'scope' = 'principal') {
    super(
      from === 'principal'
        ? `${handler}: request.user has none of ${PRINCIPAL_ID_FIELDS.join(', ')} (string or ` +
            `number), so its idempotency records cannot be scoped to it. Set the \`scope\` option ` +
            `(a function returning the caller's stable id, or 'public' for records shared by ` +
            `every caller).`
        : `${handler}: the \`scope\` function returned a value that identifies no tenant (a ` +
            `non-empty string, a number, or an object with one of ${PRINCIPAL_ID_FIELDS.join(', ')}); ` +
            `return undefined for none.`,
    );
    this.name = 'IdempotencyScopeError';
  }
}

/**
 * The stable identity of a principal, or undefined when there is none (`user` null or undefined).
 * It names the field it came from and the value's type (`id=s:42`, `sub=n:42`), so principals of
 * two kinds (a user's `id`, a service's `sub`) or two types never share records by accident.
 * Throws {@link IdempotencyScopeError} for a principal without one.
 */
export function principalId(user: unknown, handler: string): string | undefined {
  if (user === undefined || user === null) return undefined;
  const id = typeof user === 'object' ? fieldsId(user) : identity(user);
  if (id === undefined) throw new IdempotencyScopeError(handler);
  return typeof user === 'object' ? id : `=${id}`;
}

/**
 * The stable identity of what a `scope` function returned, or undefined for none (undefined,
 * null): a string, number or bigint, typed (`1` and `'1'` differ); an object with a string form
 * of its own (an ObjectId); or an object identified like a principal, by its first id field (a
 * tenant object as auth layers attach it). Throws {@link IdempotencyScopeError} for anything
 * else, an empty string included, rather than letting tenants share records.
 */
export function tenantId(tenant: unknown, handler: string): string | undefined {
  if (tenant === undefined || tenant === null) return undefined;
  const id =
    identity(tenant) ??
    (typeof tenant === 'object' && !Array.isArray(tenant) ? fieldsId(tenant) : undefined);
  if (id === undefined) throw new IdempotencyScopeError(handler, 'scope');
  return id;
}

/** The first of {@link PRINCIPAL_ID_FIELDS} that identifies `value`, as `field=typed id`. */
function fieldsId(value: object): string | undefined {
  for (const field of PRINCIPAL_ID_FIELDS) {
    const id = identity((value as Record<string, unknown>)[field]);
    if (id !== undefined) return `${field}=${id}`;
  }
  return undefined;
}

/**
 * A non-empty string, a finite number, a bigint, or an object with its own string form (ObjectId),
 * tagged with its type.
 */
function identity(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : `s:${value}`;
  if (typeof value === 'number') return Number.isFinite(value) ? `n:${value}` : undefined;
  if (typeof value === 'bigint') return `i:${value}`;
  // Binary ids (a UUID column as bytes): hex, since their text form replaces invalid UTF-8.
  if (value instanceof Uint8Array)
    return value.length === 0
      ? undefined
      : `x:${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`;
  if (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof value.toString === 'function' &&
    value.toString !== Object.prototype.toString
  ) {
    const text = String(value);
    return text === '' ? undefined : `o:${text}`;
  }
  return undefined;
}
