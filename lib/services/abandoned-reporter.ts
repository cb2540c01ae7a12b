import type { Logger } from '@nestjs/common';
import { describe, OutcomeEvents } from '../core/outcome-events';
import {
  createOpenTelemetryMetrics,
  observeRecordCounts,
  type RecordGauges,
} from '../observability/metrics';
import type { ResolvedModuleOptions } from '../options';
import type { IdempotencyStore } from '../stores/idempotency.store';
import { storeName } from '../stores/store-hooks';
import { withTimeout } from '../utils/timeout';
import type { IdempotencyRecords } from './idempotency-records.service';
import type { IdempotencyRecordListItem } from './record-list';

/** How often the reporter looks, as a share of `abandonedAfter`, and its bounds in ms. */
const SHARE = 4;
const MIN_INTERVAL = 250;
const MAX_INTERVAL = 60_000;
/** Half-done runs read per page, and pages per look at most (the next look goes on). */
const PAGE = 100;
const MAX_PAGES = 10;
/**
 * How far before the newest run it saw the reporter looks again, in ms: the store's clock and
 * this process's may differ, and a run may end (and be listed) a little after its end time.
 */
const OVERLAP = 60_000;

/**
 * Reports half-done `resumable` runs that no retry resumed within `abandonedAfter` (module
 * option): an `abandoned` event and a warning in the log, once across every process sharing the
 * store (`markAbandoned` is atomic there, so one process wins each run). Also keeps the record
 * gauges (`idempotency.records`) on the app's MeterProvider. One timer, unref'd: it never keeps
 * the process alive, and looks never overlap.
 */
export class AbandonedRunReporter {
  private readonly events: OutcomeEvents;
  private readonly gauges?: RecordGauges;
  private timer?: NodeJS.Timeout;
  private looking?: Promise<void>;
  private stopped = false;
  /** The end time (ms) of the newest half-done run seen so far: later looks start near it. */
  private seenUpTo?: number;
  /** The last look failed: the next failure is not logged again. */
  private failing = false;

  private constructor(
    private readonly records: IdempotencyRecords,
    private readonly store: IdempotencyStore,
    private readonly options: ResolvedModuleOptions,
    private readonly logger: Logger,
    /** `abandonedAfter`, or undefined when only the gauges are kept. */
    private readonly after: number | undefined,
  ) {
    const metrics = options.metrics === false ? undefined : createOpenTelemetryMetrics();
    this.events = new OutcomeEvents(logger, metrics);
    if (metrics) this.gauges = observeRecordCounts(() => records.counts());
    const every = after === undefined ? MAX_INTERVAL : after / SHARE;
    this.schedule(Math.min(MAX_INTERVAL, Math.max(MIN_INTERVAL, Math.round(every))));
  }

  /**
   * Starts reporting (and the gauges) when the store lists records; undefined when there is
   * nothing to do: a store without `list`, or `abandonedAfter: false` with `metrics: false`.
   */
  static start(
    records: IdempotencyRecords,
    store: IdempotencyStore,
    options: ResolvedModuleOptions,
    logger: Logger,
  ): AbandonedRunReporter | undefined {
    const { abandonedAfter, ttl, metrics } = options;
    const canList = Boolean(store.list && store.countRecords);
    const canReport = canList && Boolean(store.markAbandoned);
    if (abandonedAfter !== false && !canReport) {
      logger.log(
        `${storeName(store)} does not list records: half-done runs are not reported abandoned`,
      );
    }
    if (abandonedAfter !== false && canReport && abandonedAfter >= ttl) {
      logger.warn(
        `abandonedAfter (${abandonedAfter} ms) is not below ttl (${ttl} ms): a half-done run's ` +
          'steps are forgotten before it would be reported abandoned',
      );
    }
    const after = abandonedAfter !== false && canReport ? abandonedAfter : undefined;
    if (!canList || (after === undefined && metrics === false)) return undefined;
    return new AbandonedRunReporter(records, store, options, logger, after);
  }

  /** Stops looking (application shutdown), once the look under way, if any, has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.gauges?.stop();
    await this.looking;
  }

  private schedule(interval: number): void {
    if (this.stopped) return;
    // A tenth either way, so that processes started together do not look together.
    const delay = Math.round(interval * (0.9 + Math.random() * 0.2));
    this.timer = setTimeout(() => {
      this.looking = this.look().finally(() => {
        this.looking = undefined;
        this.schedule(interval);
      });
    }, delay);
    this.timer.unref();
  }

  private async look(): Promise<void> {
    this.gauges?.refresh();
    const { after } = this;
    if (after === undefined) return;
    try {
      await this.reportAbandoned(after);
      this.failing = false;
    } catch (error) {
      if (!this.failing) {
        this.logger.warn(`looking for abandoned runs failed (${describe(error)}); trying again`);
      }
      this.failing = true;
    }
  }

  /** Lists the half-done runs that ended `after` ago or more, and reports each not reported. */
  private async reportAbandoned(after: number): Promise<void> {
    const now = Date.now();
    const { seenUpTo } = this;
    const newerThan =
      seenUpTo === undefined ? undefined : Math.max(after, now - seenUpTo + OVERLAP);
    let cursor: string | undefined;
    for (let pages = 0; pages < MAX_PAGES && !this.stopped; pages++) {
      const page = await this.records.list({
        state: 'half_done',
        olderThan: after,
        newerThan,
        order: 'oldest',
        limit: PAGE,
        cursor,
      });
      for (const item of page.items) {
        if (this.stopped) return;
        if (!item.reported) await this.report(item, now - after);
        this.seenUpTo = Math.max(this.seenUpTo ?? 0, now - item.ageMs);
      }
      cursor = page.cursor;
      if (!cursor) return;
    }
  }

  /** Marks the run abandoned in the store; the one process that marks it reports it. */
  private async report(item: IdempotencyRecordListItem, endedBefore: number): Promise<void> {
    const { storeTimeout, onEvent } = this.options;
    const marking = this.store.markAbandoned!(item.ref, endedBefore);
    const marked = await withTimeout(marking, storeTimeout, () => {
      return new Error(`markAbandoned did not answer within ${storeTimeout} ms`);
    });
    if (!marked) return;
    const record = { ...item, reported: true };
    const route = item.route ?? 'unknown route';
    this.events.emit(
      { options: { onEvent }, handler: route, route },
      'abandoned',
      item.ref,
      undefined,
      record,
    );
    this.logger.warn(abandonedLine(record));
  }
}

/** The log line of an abandoned run: what an operator needs to find it and act. */
export function abandonedLine(item: IdempotencyRecordListItem): string {
  const key = item.key === undefined ? 'an unknown key' : `key ${JSON.stringify(item.key)}`;
  const owner = item.tenant
    ? `, tenant ${JSON.stringify(item.tenant)}`
    : item.user
      ? `, user ${JSON.stringify(item.user.id)}`
      : '';
  const steps = item.steps?.map((step) => step.name).join(', ') || 'none';
  const minutes = Math.round(item.ageMs / 6_000) / 10;
  return (
    `abandoned: ${item.route ?? 'a run of an unknown route'}, ${key}${owner}, steps done: ` +
    `${steps}; half done for ${minutes} min (record ${item.ref}). Retry it with the same key ` +
    'and payload to resume it, or compensate and delete it (docs/operators.md)'
  );
}
