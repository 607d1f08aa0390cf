/**
 * The timeline of one actor (one stream): its events in order with who caused each, the state before → after and
 * the context diff, beside its statechart with the selected event's state highlighted; a scrubber over the whole
 * history, a failures-only filter and links to related actors. Pages of 100 come from the server on demand
 * (GET /v1/streams/{stream}/timeline), so a long stream opens as fast as a short one; the feed keeps it live.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api } from './api.js';
import { html } from './html.js';
import { FEED_OPENED, useFeed } from './live.js';
import { ErrorLine, leafStates, stateLabel, time, timelineLink } from './format.js';
import { layout, Statechart } from './statechart.js';

const PAGE = 100;
/** Rows drawn in the first paint: about what the list shows without scrolling. */
const FIRST_ROWS = 12;
const RELATED = { environmentId: 'environment', allocationId: 'allocation', executionId: 'execution', sessionId: 'session', workspaceId: 'workspace', turnId: 'turn', leaseId: 'lease' };

/** Ids of other actors an event or a context names, as [kind, id] pairs. */
function relatedActors(steps, own) {
  const found = new Map();
  const scan = (value, depth) => {
    if (!value || typeof value !== 'object' || depth > 3) return;
    for (const [key, v] of Object.entries(value)) {
      if (RELATED[key] && typeof v === 'string' && `${RELATED[key]}-${v}` !== own) found.set(`${RELATED[key]}-${v}`, [RELATED[key], v]);
      else scan(v, depth + 1);
    }
  };
  for (const step of steps) {
    scan(step.event.data, 0);
    for (const change of Object.values(step.contextDiff ?? {})) scan({ value: change.after }, 0);
  }
  return [...found.values()];
}

function causedBy(step, byId) {
  const m = step.event.metadata ?? {};
  const runtime = m.runtimeId ? ` · runtime ${String(m.runtimeId).slice(0, 12)}#${m.epoch}` : '';
  if (!m.causationId || m.causationId === step.event.id) return `a request${runtime}`;
  const cause = byId.get(m.causationId);
  return cause ? `effect of #${cause.event.revision} ${cause.event.type}${runtime}` : `effect of event ${String(m.causationId).slice(0, 8)} (another actor)${runtime}`;
}

/** Machines do not change while the server runs: each is asked for once per tab. */
const machines = new Map();
const machineOf = (kind) => {
  if (!machines.has(kind)) machines.set(kind, api(`/v1/machines/${kind}`).catch((e) => (machines.delete(kind), Promise.reject(e))));
  return machines.get(kind);
};

const json = (v) => (v === undefined ? 'undefined' : JSON.stringify(v));

export function TimelineView({ stream }) {
  const [pages, setPages] = useState(new Map());
  const [bounds, setBounds] = useState();
  const [actorType, setActorType] = useState();
  const [machine, setMachine] = useState();
  const [selected, setSelected] = useState();
  const [failures, setFailures] = useState();
  const [error, setError] = useState();
  const refresh = useRef();
  const pageStart = (rev) => bounds.first + Math.floor((rev - bounds.first) / PAGE) * PAGE;

  const load = async (from) => {
    const page = await api(`/v1/streams/${encodeURIComponent(stream)}/timeline?from=${from}&limit=${PAGE}`);
    setBounds({ first: page.firstRevision, last: page.lastRevision });
    setActorType(page.actorType);
    const start = page.firstRevision + Math.floor((Math.max(from, page.firstRevision) - page.firstRevision) / PAGE) * PAGE;
    setPages((old) => new Map(old).set(start, page.steps));
    return page;
  };
  useEffect(() => {
    load(0).then((page) => setSelected(page.firstRevision), setError);
  }, [stream]);
  // The statechart is asked for with the first page (a stream's category names its actor type), not after it.
  const category = stream.slice(0, stream.indexOf('-'));
  useEffect(() => {
    machineOf(category).then(setMachine, () => {});
  }, [category]);
  useEffect(() => {
    if (actorType && actorType !== category) machineOf(actorType).then(setMachine, setError);
  }, [actorType]);
  useEffect(() => {
    if (bounds && selected !== undefined && !pages.has(pageStart(selected))) load(pageStart(selected)).catch(setError);
  }, [selected, bounds?.first]);
  useEffect(() => {
    if (failures === undefined || failures.steps) return;
    api(`/v1/streams/${encodeURIComponent(stream)}/timeline?failures=true&limit=500`).then((page) => setFailures({ steps: page.steps }), setError);
  }, [failures]);
  useFeed((event) => {
    if (event === FEED_OPENED && bounds) return void load(pageStart(bounds.last)).catch(setError);
    if (event.stream !== stream) return;
    // An event that lands while the first page is on its way may not be in it: that page is read again.
    if (!bounds) return void (clearTimeout(refresh.current), (refresh.current = setTimeout(() => load(0).catch(setError), 100)));
    const revision = Number(event.revision);
    const following = selected === bounds.last;
    setBounds({ ...bounds, last: Math.max(bounds.last, revision) });
    // The page the event falls in is read again (debounced: events come in bursts); the shown one stays meanwhile.
    const start = pageStart(revision);
    clearTimeout(refresh.current);
    refresh.current = setTimeout(() => load(start).catch(setError), 100);
    if (following) setSelected(revision);
    if (failures) setFailures({});
  });

  const graph = useMemo(() => machine && layout(machine), [machine]);
  const loaded = [...pages.values()].flat();
  const byId = new Map(loaded.map((s) => [s.event.id, s]));
  const byRevision = new Map(loaded.map((s) => [Number(s.event.revision), s]));
  for (const s of failures?.steps ?? []) byRevision.set(Number(s.event.revision), s);
  const step = byRevision.get(selected);
  const listed = failures ? failures.steps ?? [] : bounds && selected !== undefined ? pages.get(pageStart(selected)) ?? [] : [];
  // The rows in view are drawn first and the rest of the page a frame later, so the first paint costs the same
  // however full the page is.
  const [drawAll, setDrawAll] = useState(false);
  useEffect(() => {
    if (listed.length <= FIRST_ROWS) return;
    const frame = requestAnimationFrame(() => setDrawAll(true));
    return () => cancelAnimationFrame(frame);
  }, [listed.length > FIRST_ROWS]);
  const drawn = drawAll ? listed : listed.slice(0, FIRST_ROWS);

  if (error && !bounds) return html`<h2>Timeline <code>${stream}</code></h2><${ErrorLine} error=${error} />`;
  return html`<h2>Timeline <code>${stream}</code> <small>${actorType ?? ''}</small></h2>
    <${ErrorLine} error=${error} />
    ${bounds &&
    html`<div class="scrubber">
      <input type="range" name="scrubber" min=${bounds.first} max=${bounds.last} value=${selected ?? bounds.first}
        onInput=${(e) => setSelected(Number(e.target.value))} />
      <span data-selected=${selected}>event ${selected} of ${bounds.first}…${bounds.last}</span>
      <label><input type="checkbox" name="failures" checked=${!!failures} onChange=${(e) => setFailures(e.target.checked ? {} : undefined)} /> failures only</label>
    </div>`}
    <p class="related">related: ${relatedActors(loaded, stream).map(([k, id]) => html`<span>${timelineLink(k, id, `${k} ${id}`)} </span>`)}</p>
    <div class="timeline" data-timeline=${stream} data-timeline-ready=${bounds && listed.length > 0 ? 'yes' : 'no'}>
      <ol class="events">
        ${drawn.map((s) => {
          const rev = Number(s.event.revision);
          return html`<li data-revision=${rev} class=${rev === selected ? 'selected' : ''} onClick=${() => setSelected(rev)}>
            <span class="rev">#${rev}</span> <span class="time">${time(Date.parse(s.event.createdAt))}</span>${' '}
            <strong>${s.event.type}</strong> <span class="states">${stateLabel(s.stateBefore)} → ${stateLabel(s.stateAfter)}</span>
            <div class="who">${causedBy(s, byId)}</div>
          </li>`;
        })}
        ${failures && failures.steps && listed.length === 0 && html`<li class="empty">No failures in this history.</li>`}
      </ol>
      <div class="detail">
        ${graph && html`<${Statechart} machine=${machine} graph=${graph} current=${leafStates(step?.stateAfter)} previous=${leafStates(step?.stateBefore)} event=${step?.event.type} />`}
        ${step &&
        html`<div class="step" data-step=${selected}>
          <p><strong>#${step.event.revision} ${step.event.type}</strong> at ${time(Date.parse(step.event.createdAt))}: ${stateLabel(step.stateBefore)} → ${stateLabel(step.stateAfter)}</p>
          <table class="diff"><thead><tr><th>context</th><th>before</th><th>after</th></tr></thead>
            <tbody>${Object.entries(step.contextDiff ?? {}).map(([key, c]) => html`<tr><td>${key}</td><td><code>${json(c.before)}</code></td><td><code>${json(c.after)}</code></td></tr>`)}</tbody>
          </table>
          <details><summary>event data</summary><pre>${JSON.stringify(step.event.data, null, 2)}</pre></details>
        </div>`}
      </div>
    </div>`;
}
