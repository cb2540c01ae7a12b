import type { RecordedStep, StoredStep } from '../idempotency.store';

/** The steps recorded under one key. */
interface KeySteps {
  /** The fingerprint of the run that recorded them (of the record it owned). */
  fingerprint: string;
  byIndex: Map<number, StoredStep>;
  /** When they are forgotten, on the store's clock: `ttl` after the last one was recorded. */
  expiresAt: number;
}

/**
 * The steps of resumable runs, per key, apart from the records: a record goes (released, its
 * lease expired) and its steps stay until `ttl` after the last one was recorded, so that the next
 * run of the request resumes after them. Deleted with a completion that clears them, or by an
 * operator's `delete()`.
 */
export class MemorySteps {
  private readonly keys = new Map<string, KeySteps>();

  constructor(private readonly now: () => number) {}

  /** Records `step` under `key`, for a record of `fingerprint`; replaces one at its index. */
  record(key: string, fingerprint: string, step: StoredStep, ttlMs: number): void {
    let steps = this.live(key);
    // Steps of another payload (a claim that does not resume took the key meanwhile) go.
    if (!steps || (fingerprint && steps.fingerprint && steps.fingerprint !== fingerprint)) {
      this.keys.set(key, (steps = { fingerprint, byIndex: new Map(), expiresAt: 0 }));
    }
    steps.fingerprint ||= fingerprint;
    // Copy the body: the caller's buffer may be reused or mutated after the call.
    const { meta, body } = step.result;
    const result = { meta, body: Buffer.from(body) };
    steps.byIndex.set(step.index, { index: step.index, name: step.name, result });
    steps.expiresAt = this.now() + ttlMs;
  }

  /**
   * What a resumable claim of a record of `fingerprint` resumes from: the key's steps, or
   * `'key_reused'` when another payload recorded them (they are that payload's partial effects).
   * `''` on either side compares nothing, as with records.
   */
  resume(key: string, fingerprint: string): StoredStep[] | 'key_reused' {
    const steps = this.live(key);
    if (!steps) return [];
    if (fingerprint && steps.fingerprint && steps.fingerprint !== fingerprint) return 'key_reused';
    return [...steps.byIndex.values()].map(({ index, name, result }) => ({
      index,
      name,
      result: { meta: result.meta, body: Buffer.from(result.body) },
    }));
  }

  /** The key's steps as operators see them (index and name, in order), or undefined for none. */
  inspect(key: string): RecordedStep[] | undefined {
    const steps = this.live(key);
    if (!steps || steps.byIndex.size === 0) return undefined;
    return [...steps.byIndex.values()]
      .map(({ index, name }) => ({ index, name }))
      .sort((a, b) => a.index - b.index);
  }

  /** Deletes the key's steps. @returns whether it had some. */
  delete(key: string): boolean {
    const had = this.live(key) !== undefined;
    this.keys.delete(key);
    return had;
  }

  /** Drops the steps whose time ran out. */
  sweep(): void {
    const now = this.now();
    for (const [key, steps] of this.keys) if (steps.expiresAt <= now) this.keys.delete(key);
  }

  clear(): void {
    this.keys.clear();
  }

  private live(key: string): KeySteps | undefined {
    const steps = this.keys.get(key);
    if (steps && steps.expiresAt <= this.now()) {
      this.keys.delete(key);
      return undefined;
    }
    return steps;
  }
}
