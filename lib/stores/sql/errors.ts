/** An error's message, or the value as text. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A value's constructor name, for messages about handles of the wrong kind. */
export function describeValue(value: unknown): string {
  if (value === null || typeof value !== 'object') return String(value);
  return value.constructor?.name ?? 'an object';
}

/** `promise`, or 'timeout' after `ms`. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The database's error code (SQLSTATE or mysql2's code) of an error from a driver or from an ORM
 * that wraps the driver's error: TypeORM (`driverError`), Drizzle and others (`cause`), Sequelize
 * (`original`), Prisma's raw queries (`meta.code`). Undefined when none says.
 */
export function databaseErrorCode(error: unknown): string | undefined {
  for (let e = error as Record<string, unknown> | undefined, depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string' && !/^P\d{4}$/.test(e.code)) return e.code;
    const meta = e.meta as { code?: unknown } | undefined;
    if (typeof meta?.code === 'string') return meta.code;
    e = (e.driverError ?? e.cause ?? e.original) as Record<string, unknown> | undefined;
  }
  return undefined;
}
