import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type {
  IdempotencyDuration,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import { IdempotencyStore } from '../stores/idempotency.store';
import { storeHealthDetails } from '../stores/store-hooks';
import { parseDuration } from '../options/duration';
import { unknownOptionProblem } from '../options/option-names';
import { withTimeout } from '../utils/timeout';

/** Options of {@link IdempotencyHealthIndicator.pingCheck}. */
export interface IdempotencyPingCheckOptions {
  /**
   * Longest the check waits for the store (claim and release together): milliseconds or a
   * duration string (`'1s'`). Default: 1 000.
   */
  timeout?: IdempotencyDuration;
}

/** The names {@link IdempotencyPingCheckOptions} takes, kept complete by the compiler. */
const PING_CHECK_OPTIONS = Object.keys({ timeout: true } satisfies Record<
  keyof IdempotencyPingCheckOptions,
  true
>);

/**
 * How long the health record lives if its release never arrives, in milliseconds: the key frees
 * itself after this, whatever happens to the check.
 */
const HEALTH_LEASE_MS = 5_000;

/**
 * A Terminus health indicator for the idempotency store. It does what a request does: claims a
 * reserved key (`<keyPrefix>{health}`) with a random token and a short lease, then releases it,
 * so it works on every store (memory, Redis single node, Sentinel, Cluster, SQL, your own) and
 * proves that the store answers the calls requests depend on, scripts included. Two round trips,
 * and beside them the store's own health details, if it has any (`IdempotencyStore.healthDetails`),
 * which the `up` result carries: on Redis a third, concurrent round trip reads
 * `maxmemory-policy`, and a policy that may evict records (any but `noeviction`) is reported as
 * `evictionPolicy` and `warning` (the store answers; a restart would not change the policy, so it
 * is not `down`). Quiet where `CONFIG` is disabled.
 *
 * Provide it next to `TerminusModule`; it injects the store of `IdempotencyModule`.
 *
 * @example
 * ```ts
 * @Get('health')
 * @HealthCheck()
 * check() {
 *   return this.health.check([() => this.idempotency.pingCheck('idempotency')]);
 * }
 * ```
 */
@Injectable()
export class IdempotencyHealthIndicator {
  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly health: HealthIndicatorService,
  ) {}

  /**
   * `up` when the store claimed and released the health key within `timeout` (a concurrent check
   * holding it counts as an answer too), else `down` with the reason. `up` carries the store's
   * health details: `evictionPolicy` and `warning` when Redis may evict records (see above).
   */
  async pingCheck<const Key extends string>(
    key: Key,
    options: IdempotencyPingCheckOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.health.check(key);
    // A misspelt `timeout` would silently keep the default, as an invalid one would not.
    const problem = unknownOptionProblem(options, PING_CHECK_OPTIONS);
    if (problem) throw new TypeError(`pingCheck: ${problem}`);
    const timeout = parseDuration(options.timeout ?? 1_000, 'pingCheck timeout');
    try {
      const [, details] = await withTimeout(
        Promise.all([this.ping(), storeHealthDetails(this.store)]),
        timeout,
        () => new Error(`timeout of ${timeout} ms exceeded`),
      );
      return details === undefined ? indicator.up() : indicator.up(details);
    } catch (error) {
      return indicator.down({ message: error instanceof Error ? error.message : String(error) });
    }
  }

  private async ping(): Promise<void> {
    const key = `${this.options.keyPrefix}{health}`;
    const token = randomUUID();
    const result = await this.store.claim(key, {
      token,
      fingerprint: '',
      leaseMs: HEALTH_LEASE_MS,
    });
    if (result.status === 'claimed') await this.store.release(key, token);
  }
}
