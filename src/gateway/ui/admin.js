/**
 * The admin's views of the server itself: warm pools (what each holds, how claims went, its last refill error and
 * backoff; drain one) and the runtimes sharing the event store. Their routes answer a member `forbidden`, which the
 * view says in one line. Pool and runtime state changes without a feed event of the scope, so both poll.
 */
import { useState } from 'preact/hooks';
import { api } from './api.js';
import { html } from './html.js';
import { usePolled } from './live.js';
import { ErrorLine, time } from './format.js';
import { Table } from './lists.js';

/** The error line, saying first that a refusal is about the token's role. */
const AdminError = ({ error }) =>
  html`<${ErrorLine} error=${error?.status === 403 ? { message: `This view needs an admin token: ${error.message}`, code: error.code } : error} />`;

function Drain({ name }) {
  const [answer, setAnswer] = useState();
  const drain = async () => {
    try {
      const { drained } = await api(`/v1/pools/${encodeURIComponent(name)}/drain`, { method: 'POST', body: {} });
      setAnswer(`drained ${drained}`);
    } catch (err) {
      setAnswer(html`<${ErrorLine} error=${err} />`);
    }
  };
  return html`<button data-drain=${name} onClick=${drain}>Drain</button> <span class="answer">${answer}</span>`;
}

const profileLabel = (profile) => [profile.provider, profile.image].filter(Boolean).join(' ') || JSON.stringify(profile);

function refill(p) {
  if (!p.lastError) return '—';
  const backoff = p.nextAttemptAt && p.nextAttemptAt > Date.now() ? `; retrying at ${time(p.nextAttemptAt)}` : '';
  return html`<span class="error">${p.lastError}</span> (${time(p.lastErrorAt)}, ${p.consecutiveFailures} in a row${backoff})`;
}

export function PoolsView() {
  const { data, error } = usePolled(() => api('/v1/pools'));
  const rows = (data?.pools ?? []).map(
    (p) => html`<tr data-pool=${p.name}>
      <td>${p.name}</td><td><code>${profileLabel(p.profile)}</code></td><td>${p.size}</td>
      <td class="state">${p.ready}</td><td>${p.starting}</td><td>${p.retiring}</td>
      <td>${p.claims.hit} / ${p.claims.miss} / ${p.claims.fallback}</td><td>${refill(p)}</td><td><${Drain} name=${p.name} /></td>
    </tr>`,
  );
  return html`<h2>Warm pools</h2><${AdminError} error=${error} />
    ${data && html`<${Table} name="pools" head=${['pool', 'profile', 'size', 'ready', 'starting', 'retiring', 'claims hit / miss / fallback', 'last refill error', '']} rows=${rows} empty="No pools configured (BERTH_POOLS)." />`}`;
}

export function RuntimesView() {
  const { data, error } = usePolled(() => api('/v1/runtimes'));
  const rows = (data ?? []).map(
    (r) => html`<tr data-runtime=${r.runtimeId} data-self=${r.self ? 'yes' : 'no'}>
      <td>${r.runtimeId}${r.self ? html` <strong>(this one)</strong>` : ''}</td><td class="state">${r.state}</td><td>${r.epoch}</td>
      <td>${r.url ?? '—'}</td><td>${r.hostname}</td><td>${r.pid}</td><td>${r.startedAt}</td><td>${r.retiredBy ?? ''}</td>
    </tr>`,
  );
  return html`<h2>Runtimes</h2><${AdminError} error=${error} />
    ${data && html`<${Table} name="runtimes" head=${['runtime', 'state', 'epoch', 'url', 'host', 'pid', 'started', 'retired by']} rows=${rows} empty="No runtimes." />
      <p class="hint">Retiring a runtime hands its unfinished actors to another: do it with <code>berth runtime retire ID</code> or <code>POST /v1/runtimes/{id}/retire</code>, not from here.</p>`}`;
}
