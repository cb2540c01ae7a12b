import { ClsPluginTransactional } from '@nestjs-cls/transactional';
import type { TransactionalAdapter } from '@nestjs-cls/transactional';
import {
  type FactoryProvider,
  type INestApplicationContext,
  Module,
  type ModuleMetadata,
  type ValueProvider,
} from '@nestjs/common';
import { ClsModule } from 'nestjs-cls';
import {
  type IdempotencyEvent,
  IdempotencyModule,
  type IdempotencyModuleOptions,
} from '../../../lib';
import type { OpenOrm } from './orms';

/** What a declining handler's caller is told, whatever the transport. */
export const DECLINED = 'card declined';

/** Items whose handler declines its first run (after its write), and runs normally after. */
export const DECLINES_ONCE = 'declines-once';

/** The handler's refusal, before an entry point turns it into its transport's error. */
export class Declined extends Error {
  constructor() {
    super(DECLINED);
  }
}

/** Turns the handler's refusal into `transport`'s error; anything else passes unchanged. */
export const declinedAs = (error: unknown, transport: (message: string) => unknown) =>
  error instanceof Declined ? transport(error.message) : error;

/**
 * The handler every entry point serves, and what the tests read beside the database: the events
 * the module reported, and holds that keep a handler open after its write until the test lets go.
 */
export class Ledger {
  readonly events: IdempotencyEvent[] = [];
  private readonly declined = new Set<string>();
  private listeners: (() => void)[] = [];
  private readonly holds = new Map<string, { started: () => void; released: Promise<void> }>();

  constructor(private readonly orm: OpenOrm) {}

  /** Writes the payment of `item` through `tx` (the app's transaction); resolves its id. */
  async pay(tx: unknown, item: string): Promise<number> {
    const id = await this.orm.insert(tx, item);
    if (item.startsWith(DECLINES_ONCE) && !this.declined.has(item)) {
      this.declined.add(item);
      throw new Declined();
    }
    const hold = this.holds.get(item);
    if (hold) {
      this.holds.delete(item);
      hold.started();
      await hold.released;
    }
    return id;
  }

  /**
   * Holds the next run for `item` after its write: `started` resolves once it is held, `release`
   * lets it finish.
   */
  hold(item: string): { started: Promise<void>; release: () => void } {
    let started!: () => void;
    let release!: () => void;
    const startedPromise = new Promise<void>((resolve) => (started = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.holds.set(item, { started, released });
    return { started: startedPromise, release };
  }

  /** The module's onEvent listener: keeps the event and wakes {@link Ledger.next}'s callers. */
  record(event: IdempotencyEvent): void {
    this.events.push(event);
    for (const listener of [...this.listeners]) listener();
  }

  /**
   * The first event at or after index `from` that `matches`, as soon as it is reported; rejects
   * after `timeoutMs`, so a missing event fails the test instead of hanging it.
   */
  next(
    from: number,
    matches: (event: IdempotencyEvent) => boolean,
    { timeoutMs = 10_000, signal }: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<IdempotencyEvent> {
    return new Promise((resolve, reject) => {
      const done = () => {
        this.listeners = this.listeners.filter((listener) => listener !== check);
        clearTimeout(timer);
        signal?.removeEventListener('abort', abort);
      };
      const look = () => {
        const found = this.events.slice(from).find(matches);
        if (!found) return false;
        done();
        resolve(found);
        return true;
      };
      const check = () => void look();
      const abort = () => {
        done();
        reject(new Error('no longer awaited'));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching event within ${timeoutMs} ms`));
      }, timeoutMs);
      signal?.addEventListener('abort', abort);
      if (!look()) this.listeners.push(check);
    });
  }

  /** The types of the events since `mark` (`events.length` then): a test's own calls. */
  typesSince(mark: number): string[] {
    return this.events.slice(mark).map((event) => event.type);
  }

  /** The last event of `type`. */
  last(type: IdempotencyEvent['type']): IdempotencyEvent {
    const found = this.events.filter((event) => event.type === type).at(-1);
    if (!found) throw new Error(`no '${type}' event was reported`);
    return found;
  }
}

/** What a module's `imports` takes. */
export type ModuleImports = NonNullable<ModuleMetadata['imports']>;

/**
 * The modules of an app whose transactions go through `@nestjs-cls/transactional`: the ORM's
 * instance provided under a token, `ClsModule` with `ClsPluginTransactional` over `adapter`
 * (ClsModule's interceptor mounted where `interceptor`: microservices have no HTTP middleware),
 * and IdempotencyModule with `options`.
 */
export function transactionalImports(
  database: ValueProvider | FactoryProvider,
  adapter: (token: never) => object,
  options: IdempotencyModuleOptions,
  extra: { interceptor?: boolean } = {},
): ModuleImports {
  @Module({ providers: [database], exports: [database.provide] })
  class DatabaseModule {}
  return [
    DatabaseModule,
    ClsModule.forRoot({
      ...(extra.interceptor ? { interceptor: { mount: true } } : {}),
      plugins: [
        new ClsPluginTransactional({
          imports: [DatabaseModule],
          adapter: adapter(database.provide as never) as TransactionalAdapter<
            unknown,
            unknown,
            unknown
          >,
        }),
      ],
    }),
    IdempotencyModule.forRoot(options),
  ];
}

/** An entry point's answer, in the terms the matrix compares. */
export interface Answer {
  /** The handler's result reached the caller (a 2xx, data without errors, a reply...). */
  ok: boolean;
  /** The result as the caller decoded it (on failure, the transport's error description). */
  value: unknown;
  /** The answer as it travelled (a body, a reply), compared byte for byte with a replay. */
  text: string;
  /** HTTP only: the Idempotent-Replayed header was set. */
  replayed?: boolean;
}

/** An app serving {@link Ledger.pay} through one entry point. */
export interface RunningEntry {
  app: INestApplicationContext;
  /** Calls the handler with `key` for `item`. */
  call(key: string, item: string): Promise<Answer>;
  close(): Promise<void>;
}

/** One way a request reaches an idempotent, transactional handler. */
export interface EntryPoint {
  /** In test titles. */
  name: string;
  /** What the caller of a declining handler gets as {@link Answer.text}. */
  declined: string | RegExp;
  /** What the caller of a fenced handler (its key taken over) gets as {@link Answer.text}. */
  fenced: string | RegExp;
  /**
   * Boots an app with `imports` (see {@link transactionalImports}; `interceptor` says whether
   * the entry point needs ClsModule's interceptor) serving `ledger`'s handler.
   */
  start(imports: (interceptor: boolean) => ModuleImports, ledger: Ledger): Promise<RunningEntry>;
}
