import { randomUUID } from 'node:crypto';

/**
 * `count` event ids in publishing order, `duplicateShare` of them repeats of an earlier one
 * (seeded, so every run publishes the same pattern), unique to this run.
 */
export function publishingOrder(count: number, duplicateShare: number): string[] {
  let seed = 42;
  const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const run = randomUUID().slice(0, 8);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(i > 0 && next() < duplicateShare ? ids[Math.floor(next() * i)] : `${run}-${i}`);
  }
  return ids;
}

/** Resolves once `condition` holds (about what other processes did: checked every 50 ms). */
export function until(condition: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const deadline = setTimeout(() => {
      clearInterval(check);
      reject(new Error(`condition not met within ${ms} ms`));
    }, ms);
    const check = setInterval(() => {
      void Promise.resolve(condition()).then((met) => {
        if (!met) return;
        clearInterval(check);
        clearTimeout(deadline);
        resolve();
      }, reject);
    }, 50);
  });
}

/** What a consumer process reported (AppProcess): lines of a word, their rest. */
interface Reporter {
  reports(word: string): string[];
}

/**
 * The ids `word` reported by killed consumers that they never SETTLED: with `EFFECT`, the crash
 * window (the side effect started, its outcome never stored); with `DELIVER`, the deliveries they
 * held when killed.
 */
export function unsettledOn(killed: Reporter[], word: string): Set<string> {
  return new Set(
    killed.flatMap((c) => {
      const settled = new Set(c.reports('SETTLED'));
      return c.reports(word).filter((id) => !settled.has(id));
    }),
  );
}

/**
 * Drives every key through `drive`, `inFlight` at a time (a client's pool of connections); the
 * first key that fails stops the others from taking new keys, and fails the run.
 */
export async function driveAll(
  keys: string[],
  inFlight: number,
  drive: (key: string) => Promise<void>,
): Promise<void> {
  const queue = [...keys];
  const worker = async () => {
    try {
      for (let key = queue.shift(); key !== undefined; key = queue.shift()) await drive(key);
    } catch (error) {
      queue.length = 0;
      throw error;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/**
 * When a crash test kills its app: `kills` times over a run of `total` completed keys, once in
 * each slice of the run's middle 80 %, at a random place in the slice; one kill at a time, made
 * by `kill` (which picks its own random moment, and starts the next app).
 */
export class KillSchedule {
  private readonly at: number[];
  private done = 0;
  private made = 0;
  private killing?: Promise<void>;

  constructor(
    total: number,
    kills: number,
    private readonly kill: () => Promise<void>,
  ) {
    const slice = (total * 0.8) / kills;
    this.at = Array.from({ length: kills }, (_, i) =>
      Math.floor(total * 0.1 + slice * i + Math.random() * slice * 0.8),
    );
  }

  /** A key completed: the kill due at this point, if any, starts. */
  progressed(): void {
    this.done++;
    if (this.killing || this.made >= this.at.length || this.done < this.at[this.made]) return;
    this.made++;
    this.killing = this.kill().finally(() => (this.killing = undefined));
  }

  /** Resolves once the kill in progress, if any, is over (its replacement app started). */
  async settled(): Promise<void> {
    await this.killing;
  }
}
