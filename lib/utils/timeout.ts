/**
 * `promise`, or a rejection with `onTimeout()` after `ms`, whichever comes first. The timer is
 * cleared as soon as `promise` settles; a rejection of `promise` after the timeout is ignored,
 * never unhandled. `promise` itself runs on: a timeout only stops the wait.
 */
export function withTimeout<T>(
  promise: PromiseLike<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
