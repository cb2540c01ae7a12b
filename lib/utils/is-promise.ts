/**
 * Whether a value is a promise (an async function's result, a decompression's) the caller then
 * awaits. A thenable, not `instanceof Promise`: promises from another realm (Node's internals
 * under a test runner's VM context) or library, are promises too.
 */
export function isPromise<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
