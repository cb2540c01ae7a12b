import {
  BadRequestException,
  ForbiddenException,
  Get,
  HttpException,
  Inject,
  Logger,
  Optional,
  Post,
  Req,
  Res,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedModuleOptions } from '../options';
import { parseDuration } from '../options/duration';
import {
  IdempotencyRecords,
  type IdempotencyRecordRef,
} from '../services/idempotency-records.service';
import { LISTED_STATES, type ListedState } from '../stores/record-listing';
import {
  crossSiteProblem,
  deleteToken,
  newSecret,
  secretCookie,
  secretFromCookies,
  tokenMatches,
} from './csrf';
import { PAGE_HEADERS } from './html';
import type { ResolvedOperatorPageOptions } from './operator-page.options';
import type { RecordsReader } from './records-reader';
import {
  confirmPage,
  link,
  listPage,
  type ListFilters,
  type PageContext,
  problemPage,
  recordPage,
} from './views';

/** Injection token of the page's resolved options. */
export const OPERATOR_PAGE_OPTIONS = Symbol('IDEMPOTENCY_OPERATOR_PAGE_OPTIONS');

/** What the page reads of a request, on Express and Fastify alike. */
interface PageRequest {
  headers: Record<string, string | string[] | undefined>;
  query?: Record<string, unknown>;
  body?: Record<string, unknown>;
  protocol?: string;
}

/** What each notice of the list says (`?done=...` after a deletion). */
const NOTICES: Record<string, string> = {
  deleted: 'The record was deleted.',
  gone: 'There was nothing to delete: the record had gone already.',
};

/** Titles of the problem pages, by status. */
const TITLES: Record<number, string> = {
  400: 'Bad request',
  403: 'Refused',
  404: 'Not found',
  501: 'The store cannot list records',
  503: 'The store did not answer',
};

/**
 * The operator page's routes. `IdempotencyOperatorPageModule.register()` serves them under the
 * app's path, from a subclass that carries that path and the app's guards: nothing reaches a
 * handler here before the guards let it.
 */
export class OperatorPageController {
  private readonly logger = new Logger('IdempotencyOperatorPage');

  constructor(
    @Inject(IdempotencyRecords) private readonly records: RecordsReader,
    @Inject(OPERATOR_PAGE_OPTIONS) private readonly options: ResolvedOperatorPageOptions,
    private readonly adapterHost: HttpAdapterHost,
    @Optional()
    @Inject(IDEMPOTENCY_OPTIONS)
    private readonly moduleOptions?: Pick<ResolvedModuleOptions, 'keyPrefix'>,
  ) {}

  /** Counts per state and a page of one state's records, filtered. */
  @Get()
  async list(@Req() request: PageRequest, @Res() response: unknown): Promise<void> {
    await this.answer(request, response, '', async (page) => {
      const query = request.query ?? {};
      const filters: ListFilters = {
        state: listedState(query.state) ?? LISTED_STATES[0],
        route: text(query.route, 'route'),
        olderThan: text(query.olderThan, 'olderThan'),
        newerThan: text(query.newerThan, 'newerThan'),
        order: text(query.order, 'order') === 'oldest' ? 'oldest' : 'newest',
      };
      const cursor = text(query.cursor, 'cursor');
      const { keyPrefix, pageSize } = this.options;
      const [counts, found] = await Promise.all([
        this.records.counts(keyPrefix),
        this.records.list({
          state: filters.state,
          route: filters.route,
          olderThan: age(filters.olderThan, 'Older than'),
          newerThan: age(filters.newerThan, 'Newer than'),
          order: filters.order,
          limit: pageSize,
          cursor,
          keyPrefix,
        }),
      ]);
      const done = String(query.done);
      // Its own names only: `?done=constructor` is no notice of Object's.
      const notice = Object.hasOwn(NOTICES, done) ? NOTICES[done] : undefined;
      const view = { counts, filters, ...found, paged: cursor !== undefined, notice };
      return listPage(page, view);
    });
  }

  /** One record: its state, lease, steps and stored outcome. */
  @Get('record')
  async record(@Req() request: PageRequest, @Res() response: unknown): Promise<void> {
    await this.answer(request, response, '/record', async (page) => {
      const ref = refOf(request.query?.ref);
      const found = await this.records.inspect(this.refTo(ref));
      return recordPage(page, ref, found, listedState(request.query?.state));
    });
  }

  /** The confirmation before a deletion: what it does, and a form bound to this browser. */
  @Get('delete')
  async confirm(@Req() request: PageRequest, @Res() response: unknown): Promise<void> {
    await this.answer(request, response, '/delete', async (page) => {
      const ref = refOf(request.query?.ref);
      const found = await this.records.inspect(this.refTo(ref));
      const secret = secretFromCookies(request.headers.cookie) ?? newSecret();
      const secure = request.protocol === 'https';
      const cookie = secretCookie(secret, page.base, secure);
      this.adapterHost.httpAdapter.setHeader(response, 'Set-Cookie', cookie);
      const from = listedState(request.query?.state);
      return confirmPage(page, ref, found, deleteToken(secret, ref), from);
    });
  }

  /** Deletes (or releases) a record, once the page's own confirmation form says so. */
  @Post('delete')
  async delete(@Req() request: PageRequest, @Res() response: unknown): Promise<void> {
    await this.answer(request, response, '/delete', async (page) => {
      const problem = crossSiteProblem(request.headers);
      if (problem) throw new ForbiddenException(`Refused: ${problem}.`);
      if (typeof request.body !== 'object' || request.body === null) {
        throw new BadRequestException(
          "The form's body was not read: the page needs the app's urlencoded body parser " +
            "(Nest's default; bodyParser: false turns it off).",
        );
      }
      const { body } = request;
      const ref = refOf(body.ref);
      if (!tokenMatches(secretFromCookies(request.headers.cookie), ref, body.token)) {
        throw new ForbiddenException(
          'Refused: the confirmation expired or did not come from this page. Open the record ' +
            'and confirm again.',
        );
      }
      const deleted = await this.records.delete(this.refTo(ref));
      const state = listedState(body.state);
      return { redirect: link(page.base, { state, done: deleted ? 'deleted' : 'gone' }) };
    });
  }

  /**
   * Runs a handler and answers its page (or its redirect) with the page's headers; an
   * HttpException (a bad filter, a refused form, a store timeout) becomes a page saying so with
   * its status, any other error a 500 page and a log line.
   */
  private async answer(
    request: PageRequest,
    response: unknown,
    suffix: string,
    render: (page: PageContext) => Promise<string | { redirect: string }>,
  ): Promise<void> {
    const adapter = this.adapterHost.httpAdapter;
    const page = this.pageContext(adapter.getRequestUrl(request), suffix);
    let status = 200;
    let markup: string;
    try {
      const result = await render(page);
      if (typeof result !== 'string') {
        adapter.setHeader(response, 'Cache-Control', 'no-store');
        adapter.redirect(response, 303, result.redirect);
        return;
      }
      markup = result;
    } catch (error) {
      if (error instanceof HttpException) {
        status = error.getStatus();
        markup = problemPage(page, TITLES[status] ?? `Error ${status}`, messageOf(error));
      } else {
        this.logger.error(`the operator page failed: ${String(error)}`, (error as Error)?.stack);
        status = 500;
        markup = problemPage(page, 'The page failed', "See the app's log for the error.");
      }
    }
    for (const [name, value] of Object.entries(PAGE_HEADERS)) {
      adapter.setHeader(response, name, value);
    }
    adapter.reply(response, markup, status);
  }

  /** The record a `ref` names, under the page's `keyPrefix` (the module's when unset). */
  private refTo(ref: string): IdempotencyRecordRef {
    const { keyPrefix } = this.options;
    return keyPrefix === undefined ? { ref } : { ref, keyPrefix };
  }

  /** The page's own path as the request reached it: the app's global prefix included. */
  private pageContext(url: string, suffix: string): PageContext {
    let base = new URL(url, 'http://page').pathname.replace(/\/+$/, '');
    if (suffix && base.endsWith(suffix)) base = base.slice(0, -suffix.length);
    const keyPrefix = this.options.keyPrefix ?? this.moduleOptions?.keyPrefix ?? '';
    return { base: base || '/', keyPrefix };
  }
}

function listedState(value: unknown): ListedState | undefined {
  return LISTED_STATES.find((state) => state === value);
}

/** A query value that must be one string (a repeated parameter is a 400, not an array). */
function text(value: unknown, name: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw new BadRequestException(`${name} must be given once`);
  return value.trim() || undefined;
}

function refOf(value: unknown): string {
  const ref = text(value, 'ref');
  if (ref === undefined || ref.length > 1024) {
    throw new BadRequestException('ref must name a record, as the list links to it');
  }
  return ref;
}

/** A filter's duration (`15m`, `2h`, digits for ms), or a 400 saying what is accepted. */
function age(value: string | undefined, label: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseDuration(value, label);
  } catch (error) {
    throw new BadRequestException((error as Error).message);
  }
}

function messageOf(error: HttpException): string {
  const body = error.getResponse();
  if (typeof body === 'string') return body;
  const message = (body as { message?: unknown }).message;
  return Array.isArray(message) ? message.join('; ') : String(message ?? error.message);
}
