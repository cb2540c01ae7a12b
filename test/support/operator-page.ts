import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  Module,
  UnauthorizedException,
} from '@nestjs/common';
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import type {
  IdempotencyRecordListItem,
  IdempotencyRecordListQuery,
  IdempotencyRecordState,
  ListedState,
} from '../../lib';
import type { RecordsReader } from '../../lib/operator-page/records-reader';

/** The operators an app knows, by the token their requests carry (a stand-in for a login). */
@Injectable()
export class OperatorDirectory {
  readonly roles = new Map<string, string[]>([
    ['operator-token', ['operator']],
    ['viewer-token', ['viewer']],
  ]);
}

/** What the guard's dependencies come from, as an app's AuthModule. */
@Module({ providers: [OperatorDirectory], exports: [OperatorDirectory] })
export class OperatorAuthModule {}

/**
 * The app's own admin guard: no `x-operator` token is 401 (unauthenticated), a token without the
 * `operator` role 403 (unauthorised). It has a dependency, resolved through Nest's DI.
 */
@Injectable()
export class OperatorsOnly implements CanActivate {
  constructor(private readonly directory: OperatorDirectory) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>();
    const token = request.headers['x-operator'];
    const roles = typeof token === 'string' ? this.directory.roles.get(token) : undefined;
    if (!roles) throw new UnauthorizedException();
    return roles.includes('operator');
  }
}

/** A call the page made of its records provider. */
export type RecordsCall = { op: keyof RecordsReader; arg: unknown };

/**
 * A stand-in for `IdempotencyRecords` that serves fixed items and writes every call down: shows
 * what the page asked (nothing, behind a refusing guard) apart from any store.
 */
export class FakeRecords implements RecordsReader {
  readonly calls: RecordsCall[] = [];

  constructor(readonly items: IdempotencyRecordListItem[]) {}

  async list(
    query: IdempotencyRecordListQuery,
  ): Promise<{ items: IdempotencyRecordListItem[]; cursor?: string }> {
    this.calls.push({ op: 'list', arg: query });
    const all = this.items.filter((item) => item.state === query.state);
    const start = query.cursor ? Number(query.cursor) : 0;
    const limit = query.limit ?? 50;
    const items = all.slice(start, start + limit);
    const next = start + limit < all.length ? String(start + limit) : undefined;
    return { items, cursor: next };
  }

  async counts(keyPrefix?: string): Promise<Record<ListedState, number>> {
    this.calls.push({ op: 'counts', arg: keyPrefix });
    const counts = { running: 0, stuck: 0, half_done: 0, completed: 0 };
    for (const item of this.items) counts[item.state]++;
    return counts;
  }

  async inspect(item: { ref: string }): Promise<IdempotencyRecordState> {
    this.calls.push({ op: 'inspect', arg: item });
    const found = this.items.find((candidate) => candidate.ref === item.ref);
    if (!found) return { state: 'absent' };
    if (found.state === 'completed') {
      const { status, error = false } = found;
      return { state: 'completed', status, error, bytes: 42, ageMs: found.ageMs, ttlMsLeft: 9e6 };
    }
    if (found.state === 'half_done') return { state: 'absent', steps: found.steps };
    return { state: 'pending', leaseMsLeft: found.leaseMsLeft ?? 0, steps: found.steps };
  }

  async delete(item: { ref: string }): Promise<boolean> {
    this.calls.push({ op: 'delete', arg: item });
    const at = this.items.findIndex((candidate) => candidate.ref === item.ref);
    if (at >= 0) this.items.splice(at, 1);
    return at >= 0;
  }
}

/** Where Debian's chromium package puts the browser (CHROMIUM_PATH overrides it). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Headless Chromium from the machine's own package, driven by playwright-core (its own browser
 * downloads cannot work here). Fails naming it when it is missing, in CI and locally alike: the
 * browser tests are never skipped.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is missing: the operator page's browser tests need it at ${CHROMIUM_PATH} ` +
        '(Debian: apt-get install chromium; or set CHROMIUM_PATH)',
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // Without the background-networking flags, Chromium's own connections (updates, sync) are
    // refused in a sandboxed CI container and slow every launch.
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
