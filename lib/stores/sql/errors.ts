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
