import { Injectable } from '@nestjs/common';
import type { IdempotencyEvent } from 'nestjs-idempotency';

/** What `GET /stats` answers: per handler (`Controller.method`), runs and idempotency outcomes. */
export interface Stats {
  /** How many times each handler's body actually ran. */
  executions: Record<string, number>;
  /** The module's `onEvent` outcomes per handler: claimed, completed, replayed, conflict... */
  outcomes: Record<string, Record<string, number>>;
}

/** In-memory counters, so the demo and the tests can see how often each handler really ran. */
@Injectable()
export class StatsService {
  private readonly stats: Stats = { executions: {}, outcomes: {} };

  /** Called first thing in a handler's body. */
  executed(handler: string): void {
    this.stats.executions[handler] = (this.stats.executions[handler] ?? 0) + 1;
  }

  /** Wired to the module's `onEvent`. */
  outcome(event: IdempotencyEvent): void {
    const counts = (this.stats.outcomes[event.handler] ??= {});
    counts[event.type] = (counts[event.type] ?? 0) + 1;
  }

  snapshot(): Stats {
    return structuredClone(this.stats);
  }
}
