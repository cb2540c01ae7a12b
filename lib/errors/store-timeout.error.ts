/** A store call that took longer than `storeTimeout`. */
export class IdempotencyStoreTimeoutError extends Error {
  constructor(operation: string, timeoutMs: number) {
    super(`Idempotency store ${operation} timed out after ${timeoutMs} ms`);
  }
}
