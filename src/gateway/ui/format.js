/** Small display helpers shared by the views: times, stream links, state labels. */
import { html } from './html.js';

export const time = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').replace('Z', '') : '');

/** A link to the timeline of `<kind>-<id>`. */
export const timelineLink = (kind, id, label = id) => (id ? html`<a href="#/timeline/${encodeURIComponent(`${kind}-${id}`)}">${label}</a>` : '');

/** A StateValue as text: `running`, or `a.b` for nested states. */
export const stateLabel = (value) => leafStates(value).join(', ');

/** Dotted paths of the active leaf states of a StateValue. */
export function leafStates(value, prefix = '') {
  if (value === null || value === undefined) return [];
  if (typeof value === 'string') return [prefix + value];
  return Object.entries(value).flatMap(([key, child]) => leafStates(child, `${prefix}${key}.`));
}

export const ErrorLine = ({ error }) => (error ? html`<p class="error" role="alert">${error.message} (${error.code})</p>` : '');

/** Whether an execution record is terminal: every status but the two of a command not yet over (DESIGN §8). */
export const finished = (record) => record.status !== 'accepted' && record.status !== 'running';
