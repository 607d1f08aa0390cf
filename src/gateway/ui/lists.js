/**
 * The list views of the token's scope: environments (with a create form and a run-command form), active
 * allocations, executions (filtered by status and environment), builds with their logs, workspaces and leases.
 * Each reloads when the scope's feed brings an event of its kind.
 */
import { useState } from 'preact/hooks';
import { api } from './api.js';
import { html } from './html.js';
import { useLive } from './live.js';
import { ErrorLine, time, timelineLink } from './format.js';

const ofKind = (...kinds) => (event) => kinds.some((k) => event.stream.startsWith(`${k}-`));

/** The execution statuses, as the API documents them (schemas/ spells them once; the OpenAPI document carries them). */
async function executionStatuses() {
  const doc = await api('/v1/openapi.json');
  const status = doc.paths['/v1/executions'].get.parameters.find((p) => p.name === 'status');
  const find = (schema) => schema?.enum ?? (schema?.anyOf ?? schema?.oneOf ?? []).map(find).find(Boolean);
  return find(status.schema) ?? [];
}

export function Table({ name, head, rows, empty }) {
  return html`<table data-view=${name}>
    <thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead>
    <tbody>${rows.length ? rows : html`<tr><td colspan=${head.length} class="empty">${empty}</td></tr>`}</tbody>
  </table>`;
}

function CreateEnvironment() {
  const [error, setError] = useState();
  const submit = async (e) => {
    e.preventDefault();
    const form = new FormData(e.target);
    try {
      await api('/v1/environments', { method: 'POST', body: { name: form.get('name'), profile: { provider: form.get('provider') } } });
      e.target.reset();
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="inline" data-form="create-environment" onSubmit=${submit}>
    <input name="name" placeholder="new environment name" required />
    <select name="provider"><option>native</option><option>docker</option></select>
    <button type="submit">Create</button>
    <${ErrorLine} error=${error} />
  </form>`;
}

function RunCommand({ environments }) {
  const [error, setError] = useState();
  const submit = async (e) => {
    e.preventDefault();
    const form = new FormData(e.target);
    try {
      const record = await api('/v1/executions', {
        method: 'POST',
        body: {
          operationId: `console-${crypto.randomUUID()}`,
          environment: form.get('environment'),
          command: form.get('command'),
          ...(form.get('pty') ? { pty: { cols: 100, rows: 30 } } : {}),
        },
      });
      location.hash = `#/executions/${record.id}`;
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="inline" data-form="run-command" onSubmit=${submit}>
    <select name="environment">${environments.map((env) => html`<option value=${env.id}>${env.name}</option>`)}</select>
    <input name="command" placeholder="command (sh -c)" required size="40" />
    <label><input type="checkbox" name="pty" /> terminal</label>
    <button type="submit">Run</button>
    <${ErrorLine} error=${error} />
  </form>`;
}

export function EnvironmentsView() {
  const { data = [], error } = useLive(() => api('/v1/environments?limit=1000'), [], ofKind('environment', 'allocation', 'build'));
  const rows = data.map(
    (env) => html`<tr data-environment=${env.name}>
      <td>${timelineLink('environment', env.id, env.name)}</td>
      <td class="state">${env.state}</td>
      <td>${env.profile?.provider}</td>
      <td>${env.version ?? '—'}</td>
      <td>${env.allocation ? html`${timelineLink('allocation', env.allocation.allocationId)} (${env.allocation.state}, gen ${env.allocation.generation})` : '—'}</td>
    </tr>`,
  );
  return html`<h2>Environments</h2>
    <${ErrorLine} error=${error} />
    <${CreateEnvironment} />
    ${data.length > 0 && html`<${RunCommand} environments=${data} />`}
    <${Table} name="environments" head=${['name', 'state', 'provider', 'active version', 'allocation']} rows=${rows} empty="No environments in this scope." />`;
}

export function AllocationsView() {
  const { data = [], error } = useLive(() => api('/v1/allocations'), [], ofKind('allocation', 'environment'));
  const rows = data.map(
    (a) => html`<tr>
      <td>${timelineLink('allocation', a.allocationId)}</td>
      <td>${timelineLink('environment', a.environmentId)}</td>
      <td class="state">${a.state}</td><td>${a.provider}</td><td>${a.generation}</td><td>${a.uses?.length ?? 0}</td>
      <td>${time(a.updatedAt)}</td>
    </tr>`,
  );
  return html`<h2>Active allocations</h2><${ErrorLine} error=${error} />
    <${Table} name="allocations" head=${['allocation', 'environment', 'state', 'provider', 'generation', 'uses', 'updated']} rows=${rows} empty="No active allocations." />`;
}

export function ExecutionsView() {
  const [filter, setFilter] = useState({ status: '', environment: '' });
  const envs = useLive(() => api('/v1/environments?limit=1000'), [], ofKind('environment')).data ?? [];
  const statuses = useLive(executionStatuses, [], () => false).data ?? [];
  const query = new URLSearchParams({ order: 'desc', limit: '200' });
  if (filter.status) query.set('status', filter.status);
  if (filter.environment) query.set('environment', filter.environment);
  const { data = [], error } = useLive(() => api(`/v1/executions?${query}`), [filter.status, filter.environment], ofKind('execution'));
  const set = (key) => (e) => setFilter({ ...filter, [key]: e.target.value });
  const rows = data.map(
    (x) => html`<tr data-execution=${x.id}>
      <td><a href="#/executions/${x.id}">${x.id}</a></td>
      <td class="state">${x.status}</td>
      <td><code>${Array.isArray(x.command) ? x.command.join(' ') : x.command}</code></td>
      <td>${timelineLink('environment', x.target?.environmentId, x.environment)}</td>
      <td>${x.exitCode ?? ''}</td><td>${time(x.createdAt)}</td>
      <td>${timelineLink('execution', x.id, 'timeline')}</td>
    </tr>`,
  );
  return html`<h2>Executions</h2><${ErrorLine} error=${error} />
    <div class="filters">
      <select name="status" onChange=${set('status')}><option value="">any status</option>${statuses.map((s) => html`<option>${s}</option>`)}</select>
      <select name="environment" onChange=${set('environment')}><option value="">any environment</option>${envs.map((e) => html`<option value=${e.id}>${e.name}</option>`)}</select>
    </div>
    <${Table} name="executions" head=${['execution', 'status', 'command', 'environment', 'exit', 'created', '']} rows=${rows} empty="No executions match." />`;
}

function BuildLog({ environment, version }) {
  const { data, error } = useLive(() => api(`/v1/environments/${environment}/builds/${version}`), [environment, version], ofKind('build'));
  return html`<div class="buildlog"><${ErrorLine} error=${error} />
    ${data && html`<p>version ${data.version}: ${data.status}${data.error ? ` — ${data.error}` : ''}</p><pre>${data.log || '(no log yet)'}</pre>`}
  </div>`;
}

export function BuildsView() {
  const envs = useLive(() => api('/v1/environments?limit=1000'), [], ofKind('environment')).data ?? [];
  const [chosen, setChosen] = useState('');
  const [version, setVersion] = useState();
  const environment = chosen || envs[0]?.id;
  const { data, error } = useLive(() => (environment ? api(`/v1/environments/${environment}/versions`) : Promise.resolve(null)), [environment], ofKind('build', 'environment'));
  const rows = (data?.versions ?? []).map(
    (v) => html`<tr>
      <td><a href="javascript:void 0" onClick=${() => setVersion(v.version)}>${v.version}</a></td>
      <td class="state">${v.status}</td><td>${v.active ? 'active' : ''}</td><td>${v.packages}</td><td>${v.size}</td>
      <td>${time(v.started_at)}</td><td>${timelineLink('build', `${environment}-${v.version}`, 'timeline')}</td>
    </tr>`,
  );
  return html`<h2>Builds</h2><${ErrorLine} error=${error} />
    <select onChange=${(e) => (setChosen(e.target.value), setVersion(undefined))}>${envs.map((e) => html`<option value=${e.id}>${e.name}</option>`)}</select>
    <${Table} name="builds" head=${['version', 'status', '', 'packages', 'bytes', 'started', '']} rows=${rows} empty="No builds of this environment." />
    ${version !== undefined && html`<${BuildLog} environment=${environment} version=${version} />`}`;
}

export function WorkspacesView() {
  const { data = [], error } = useLive(() => api('/v1/workspaces?limit=1000'), [], ofKind('workspace', 'ownership', 'turn', 'mount'));
  const rows = data.map(
    (w) => html`<tr>
      <td>${timelineLink('workspace', w.id)}</td><td>${w.name ?? ''}</td><td>${w.kind}</td><td class="state">${w.state}</td>
      <td>${w.holder ? timelineLink('turn', w.holder.turnId) : '—'}</td><td>${w.generation}</td>
    </tr>`,
  );
  return html`<h2>Workspaces</h2><${ErrorLine} error=${error} />
    <${Table} name="workspaces" head=${['workspace', 'name', 'kind', 'state', 'held by turn', 'generation']} rows=${rows} empty="No workspaces in this scope." />`;
}

export function LeasesView() {
  const { data = [], error } = useLive(() => api('/v1/leases?limit=1000'), [], ofKind('lease'));
  const rows = data.map(
    (l) => html`<tr>
      <td>${timelineLink('lease', l.id, l.key)}</td><td>${l.work?.kind}:${l.work?.id}</td><td class="state">${l.state}</td>
      <td>${timelineLink('environment', l.environmentId)}</td>
      <td>${l.machine ? timelineLink('allocation', l.machine.allocationId) : '—'}</td><td>${time(l.updatedAt)}</td>
    </tr>`,
  );
  return html`<h2>Leases</h2><${ErrorLine} error=${error} />
    <${Table} name="leases" head=${['lease', 'work', 'state', 'environment', 'machine', 'updated']} rows=${rows} empty="No leases in this scope." />`;
}
