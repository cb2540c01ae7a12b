/** A pending call's deadline. */
interface Deadline {
  /** When it expires (`performance.now()` clock). */
  due: number;
  expire: () => void;
}

/**
 * The pending deadlines of one length, in the order they were set, which is the order they
 * expire in; one timer, set for the first of them.
 */
interface DeadlineQueue {
  pending: Set<Deadline>;
  timer?: NodeJS.Timeout;
}

const queues = new Map<number, DeadlineQueue>();

/**
 * `promise`, or a rejection with `onTimeout()` after `ms`, whichever comes first. A rejection of
 * `promise` after the timeout is ignored, never unhandled. `promise` itself runs on: a timeout
 * only stops the wait. The calls pending with one `ms` share a timer, so a busy request path does
 * not create and clear one per store call; no timer is left once none is pending.
 */
export function withTimeout<T>(
  promise: PromiseLike<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let queue = queues.get(ms);
    if (!queue) queues.set(ms, (queue = { pending: new Set() }));
    const deadline: Deadline = { due: performance.now() + ms, expire: () => reject(onTimeout()) };
    queue.pending.add(deadline);
    queue.timer ??= setTimeout(fire, ms, queue);
    const { pending } = queue;
    const settle = () => {
      if (!pending.delete(deadline) || pending.size > 0) return;
      clearTimeout(queue.timer);
      queue.timer = undefined;
    };
    promise.then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}

/** Expires the queue's due deadlines, and sets its timer for the next one. */
function fire(queue: DeadlineQueue): void {
  queue.timer = undefined;
  const now = performance.now();
  for (const deadline of queue.pending) {
    if (deadline.due > now) {
      // Timers may fire a fraction of a millisecond early by this clock: at least 1 ms on.
      queue.timer = setTimeout(fire, Math.max(1, Math.ceil(deadline.due - now)), queue);
      return;
    }
    queue.pending.delete(deadline);
    deadline.expire();
  }
}
