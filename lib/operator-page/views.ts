import type { IdempotencyRecordState } from '../services/idempotency-records.service';
import { LISTED_STATES, type ListedState } from '../stores/record-listing';
import {
  formatDuration,
  keyText,
  lease,
  outcome,
  owner,
  STATE_HINTS,
  STATE_TITLES,
  stepList,
} from './format';
import { html, layout, type Html } from './html';
import type { IdempotencyRecordListItem as PageListItem } from '../services/record-list';

/** The list's filters, as the query string carries them (durations as typed: `15m`). */
export interface ListFilters {
  state: ListedState;
  route?: string;
  olderThan?: string;
  newerThan?: string;
  order: 'newest' | 'oldest';
}

/** Where the page is and whose records it shows. */
export interface PageContext {
  /** The page's own path, as the request reached it (with the app's global prefix). */
  base: string;
  keyPrefix: string;
}

/** `base` with a query string of the values that are set. */
export function link(base: string, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== '') query.set(name, value);
  }
  const text = query.toString();
  return text ? `${base}?${text}` : base;
}

const filterParams = (filters: ListFilters): Record<string, string | undefined> => ({
  state: filters.state,
  route: filters.route,
  olderThan: filters.olderThan,
  newerThan: filters.newerThan,
  order: filters.order === 'oldest' ? 'oldest' : undefined,
});

/** The counts per state, the filters, one page of the list and the link to the next. */
export function listPage(
  page: PageContext,
  view: {
    counts: Record<ListedState, number>;
    filters: ListFilters;
    items: PageListItem[];
    cursor?: string;
    paged: boolean;
    notice?: string;
  },
): string {
  const { base } = page;
  const { filters } = view;
  const tabs = LISTED_STATES.map(
    (state) =>
      html`<a
        class="tab ${state}${state === filters.state ? ' current' : ''}"
        href="${link(base, { state })}"
        >${STATE_TITLES[state]}<span class="n">${view.counts[state]}</span></a
      >`,
  );
  const body = html` <nav class="tabs" aria-label="States">${tabs}</nav>
    ${view.notice ? html`<p class="notice" role="status">${view.notice}</p>` : undefined}
    <h2>${STATE_TITLES[filters.state]}</h2>
    <p class="muted">${STATE_HINTS[filters.state]}</p>
    ${filterForm(base, filters)}
    ${view.items.length ? table(base, filters.state, view.items) : html`<p class="muted">No ${STATE_TITLES[filters.state].toLowerCase()} records${filters.route || filters.olderThan || filters.newerThan ? ' match the filters' : ''}.</p>`}
    <nav class="pages">
      ${view.paged ? html`<a href="${link(base, filterParams(filters))}">First page</a>` : undefined}
      ${view.cursor ? html`<a href="${link(base, { ...filterParams(filters), cursor: view.cursor })}" rel="next">Next page</a>` : undefined}
    </nav>`;
  return layout(STATE_TITLES[filters.state], base, page.keyPrefix, body);
}

function filterForm(base: string, filters: ListFilters): Html {
  const field = (name: keyof ListFilters, label: string, example: string, size: number) =>
    html`<label
      >${label}
      <input name="${name}" value="${filters[name] ?? ''}" placeholder="${example}" size="${size}"
    /></label>`;
  const option = (order: ListFilters['order'], label: string) =>
    html`<option value="${order}" ${filters.order === order && html`selected`}>${label}</option>`;
  return html`<form class="filters" method="get" action="${base}">
    <input type="hidden" name="state" value="${filters.state}" />
    ${field('route', 'Route', 'POST /orders', 28)} ${field('olderThan', 'Older than', '15m', 8)}
    ${field('newerThan', 'Newer than', '1d', 8)}
    <label
      >Order
      <select name="order">
        ${option('newest', 'newest first')}${option('oldest', 'oldest first')}
      </select></label
    >
    <button type="submit">Filter</button>
    <a href="${link(base, { state: filters.state })}">Clear</a>
  </form>`;
}

function table(base: string, state: ListedState, items: PageListItem[]): Html {
  const detail: Record<ListedState, [string, (item: PageListItem) => Html]> = {
    running: ['Lease', (item) => lease(item.leaseMsLeft)],
    stuck: ['Lease', (item) => lease(item.leaseMsLeft)],
    half_done: [
      'Reported abandoned',
      (item) => (item.reported ? html`yes` : html`<span class="muted">not yet</span>`),
    ],
    completed: ['Stored', (item) => outcome(item.status, item.error)],
  };
  const [heading, cell] = detail[state];
  const rows = items.map(
    (item) =>
      html`<tr>
        <td class="key">
          <a href="${link(`${base}/record`, { ref: item.ref })}">${keyText(item)}</a>
        </td>
        <td>${item.route ?? html`<span class="muted">unknown</span>`}</td>
        <td>${owner(item)}</td>
        <td>${formatDuration(item.ageMs)}</td>
        <td>${cell(item)}</td>
        <td>
          ${state === 'completed' ? html`<span class="muted">–</span>` : stepList(item.steps)}
        </td>
        <td>
          <a href="${link(`${base}/delete`, { ref: item.ref, state })}">${actionName(state)}</a>
        </td>
      </tr>`,
  );
  return html`<table>
    <thead>
      <tr>
        <th>Key</th>
        <th>Route</th>
        <th>Owner</th>
        <th>Age</th>
        <th>${heading}</th>
        <th>Steps</th>
        <th></th>
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}

/** A held claim is released; any other record deleted (both are `IdempotencyRecords.delete`). */
function actionName(state: ListedState | undefined): string {
  return state === 'running' || state === 'stuck' ? 'Release…' : 'Delete…';
}

/** One record: its state, lease, steps and stored outcome, and the way to delete it. */
export function recordPage(
  page: PageContext,
  ref: string,
  found: IdempotencyRecordState,
  from?: ListedState,
): string {
  const { base } = page;
  const rows = recordRows(found);
  const action =
    found.state === 'absent' && !found.steps
      ? undefined
      : html`<a class="button danger" href="${link(`${base}/delete`, { ref, state: from })}"
          >${actionName(from ?? held(found))}</a
        >`;
  const body = html`<h2>Record</h2>
    <dl>
      <dt>Store key</dt>
      <dd class="key">${ref}</dd>
      ${rows}
    </dl>
    <p class="actions">${action}<a href="${link(base, { state: from })}">Back to the list</a></p>`;
  return layout('Record', base, page.keyPrefix, body);
}

const held = (found: IdempotencyRecordState): ListedState | undefined =>
  found.state === 'pending' ? 'running' : undefined;

function recordRows(found: IdempotencyRecordState): Html {
  switch (found.state) {
    case 'absent':
      return found.steps
        ? html`<dt>State</dt>
            <dd>Half done: steps recorded, nothing holds the key</dd>
            <dt>Steps</dt>
            <dd>${stepList(found.steps)}</dd>`
        : html`<dt>State</dt>
            <dd>Gone: completed and forgotten, expired, released or deleted</dd>`;
    case 'pending':
      return html`<dt>State</dt>
        <dd>${found.leaseMsLeft > 0 ? 'Running' : 'Stuck'}: claimed</dd>
        <dt>Lease</dt>
        <dd>${lease(found.leaseMsLeft)}</dd>
        <dt>Steps</dt>
        <dd>${stepList(found.steps)}</dd>`;
    case 'completed':
      return html`<dt>State</dt>
        <dd>Completed</dd>
        <dt>Stored</dt>
        <dd>${outcome(found.status, found.error)} · ${found.bytes} bytes</dd>
        <dt>Completed</dt>
        <dd>${found.ageMs < 0 ? 'unknown' : `${formatDuration(found.ageMs)} ago`}</dd>
        <dt>Forgotten in</dt>
        <dd>${formatDuration(found.ttlMsLeft)}</dd>`;
  }
}

/** What deleting does to a record in each state: said before the operator confirms. */
function consequence(found: IdempotencyRecordState): string {
  switch (found.state) {
    case 'pending':
      return (
        'Releases the claim: the next request with this key runs the handler from its first ' +
        'step. A handler still running under it is fenced (its response is not stored).'
      );
    case 'absent':
      return (
        'Forgets the recorded steps: a retry with this key no longer resumes but runs every ' +
        'step again, their effects too. To finish the request instead, have the client retry.'
      );
    case 'completed':
      return 'Forgets the stored outcome: the next request with this key runs the handler again.';
  }
}

/** The confirmation: what deleting does, and the form that does it (POST, with its token). */
export function confirmPage(
  page: PageContext,
  ref: string,
  found: IdempotencyRecordState,
  token: string,
  from?: ListedState,
): string {
  const { base } = page;
  const gone = found.state === 'absent' && !found.steps;
  const name = actionName(from ?? held(found)).replace('…', '');
  const body = gone
    ? html`<h2>Nothing to delete</h2>
        <p>There is no record under <code>${ref}</code> any more.</p>
        <p><a href="${link(base, { state: from })}">Back to the list</a></p>`
    : html`<h2>${name} this record?</h2>
        <dl>
          <dt>Store key</dt>
          <dd class="key">${ref}</dd>
          ${recordRows(found)}
        </dl>
        <p class="problem">${consequence(found)}</p>
        <form method="post" action="${base}/delete" class="actions">
          <input type="hidden" name="ref" value="${ref}" />
          <input type="hidden" name="token" value="${token}" />
          ${from ? html`<input type="hidden" name="state" value="${from}" />` : undefined}
          <button type="submit" class="danger">${name}</button>
          <a class="button plain" href="${link(`${base}/record`, { ref, state: from })}">Cancel</a>
        </form>`;
  return layout(`${name}?`, base, page.keyPrefix, body);
}

/** A page that says what went wrong (a bad filter, a refused form, a store that failed). */
export function problemPage(page: PageContext, title: string, message: string): string {
  const body = html`<h2>${title}</h2>
    <p class="problem">${message}</p>
    <p><a href="${page.base}">Back to the list</a></p>`;
  return layout(title, page.base, page.keyPrefix, body);
}
