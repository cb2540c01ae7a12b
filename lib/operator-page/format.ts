import type { ListedState } from '../stores/record-listing';
import { html, type Html } from './html';
import type { IdempotencyRecordListItem as PageListItem } from '../services/record-list';

/** How each state is named on the page. */
export const STATE_TITLES: Record<ListedState, string> = {
  running: 'Running',
  stuck: 'Stuck',
  half_done: 'Half done',
  completed: 'Completed',
};

/** What each state means, under its list. */
export const STATE_HINTS: Record<ListedState, string> = {
  running: 'A handler runs under the key now; its lease is live.',
  stuck:
    'A claim whose lease ran out without a completion (its process died or hung), or held past ' +
    'maxLockHold. Releasing it lets the next retry run.',
  half_done:
    'A resumable run recorded steps and never completed, and nothing holds its key: a retry with ' +
    'the same key resumes after its last step. Delete it only to start over from the first step.',
  completed: 'The outcome is stored; retries with the key replay it.',
};

/** A duration for people: `850 ms`, `42 s`, `7 min 5 s`, `3 h 12 min`, `2 d 4 h`. */
export function formatDuration(ms: number): string {
  const abs = Math.abs(Math.round(ms));
  if (abs < 1_000) return `${abs} ms`;
  const s = Math.floor(abs / 1_000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** The record's owner as the page shows it: the tenant, the principal's id, or public. */
export function owner(item: Pick<PageListItem, 'user' | 'tenant'>): Html {
  if (item.tenant !== undefined) return html`tenant <code>${item.tenant}</code>`;
  if (item.user !== undefined) return html`user <code>${item.user.id}</code>`;
  return html`<span class="muted">public</span>`;
}

/** The client's key, or a note that the record does not keep it (claimed before listing). */
export function keyText(item: Pick<PageListItem, 'key' | 'ref'>): Html {
  if (item.key !== undefined) return html`${item.key}`;
  return html`<span class="muted">not kept · ${item.ref}</span>`;
}

/** Recorded steps as an ordered list, or a dash. */
export function stepList(steps: { index: number; name: string }[] | undefined): Html {
  if (!steps?.length) return html`<span class="muted">none</span>`;
  // Places count from 0 in the store; people count from 1.
  const items = steps.map((step) => html`<li value="${step.index + 1}">${step.name}</li>`);
  return html`<ol class="steps">
    ${items}
  </ol>`;
}

/** A stored outcome: its status, marked when it is a stored error. */
export function outcome(status: number | undefined, error: boolean | undefined): Html {
  const text = status === undefined ? 'stored' : String(status);
  return error
    ? html`<span class="badge error">${text} error</span>`
    : html`<span class="badge">${text}</span>`;
}

/** The lease column: time left, or how long ago it ran out. */
export function lease(leaseMsLeft: number | undefined): Html {
  if (leaseMsLeft === undefined) return html`<span class="muted">–</span>`;
  if (leaseMsLeft > 0) return html`${formatDuration(leaseMsLeft)} left`;
  return html`ran out ${formatDuration(-leaseMsLeft)} ago`;
}
