import type {
  ClaimResult,
  CompletedOutcome,
  IdempotencyStore,
  StoredResponse,
} from '../stores/idempotency.store';

/** A test body, as the runner takes it. */
export type Body = () => void | Promise<void>;

/** What the parts of the contract suite share: the store under test and the suite's helpers. */
export interface ContractContext {
  /** The store under test (created in the suite's `beforeAll`). */
  readonly store: IdempotencyStore;
  /** The runner's `it`. */
  it: (name: string, fn: Body, timeout?: number) => void;
  /** Each test's timeout, in ms. */
  timeout: number;
  /** The lease of the time-based tests, in ms. */
  lease: number;
  /** A key no other test uses. */
  key: () => string;
  /** Claims `k` for `token`. */
  claim: (k: string, token: string, fingerprint?: string, leaseMs?: number) => Promise<ClaimResult>;
  /** Lets `ms` pass for the store. */
  advanceTime: (ms: number) => Promise<void>;
}

/** A stored response whose body is `text` and then the bytes `extra`. */
export const response = (text: string, extra: number[] = []): StoredResponse => ({
  meta: JSON.stringify({ s: 201, k: 'text', note: text }),
  body: Buffer.concat([Buffer.from(text), Buffer.from(extra)]),
});

/**
 * A listener that counts its calls and keeps the last outcome it was handed, and a way to wait
 * (at most 5 s) for the first call.
 */
export function signal() {
  let count = 0;
  let last: CompletedOutcome | undefined;
  let resolve!: () => void;
  const fired = new Promise<void>((r) => (resolve = r));
  return {
    fire: (completed?: CompletedOutcome) => {
      count++;
      last = completed;
      resolve();
    },
    get count() {
      return count;
    },
    get last() {
      return last;
    },
    async wait(): Promise<void> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error('the watcher was not notified within 5 s')),
          5_000,
        );
      });
      try {
        await Promise.race([fired, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
