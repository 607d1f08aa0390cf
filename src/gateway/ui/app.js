/**
 * The console's shell: sign-in (the token is checked against the API before it is kept), the navigation and a
 * hash router (#/environments, #/executions/<id>, #/timeline/<stream>, …) over the views.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, signIn, signOut, token } from './api.js';
import { html } from './html.js';
import { stopFeed } from './live.js';
import { AllocationsView, BuildsView, EnvironmentsView, ExecutionsView, LeasesView, WorkspacesView } from './lists.js';
import { ExecutionView } from './execution.js';
import { PoolsView, RuntimesView } from './admin.js';
import { TimelineView } from './timeline.js';

const views = [
  ['environments', 'Environments', EnvironmentsView],
  ['allocations', 'Allocations', AllocationsView],
  ['executions', 'Executions', ExecutionsView],
  ['builds', 'Builds', BuildsView],
  ['workspaces', 'Workspaces', WorkspacesView],
  ['leases', 'Leases', LeasesView],
  ['pools', 'Pools', PoolsView],
  ['runtimes', 'Runtimes', RuntimesView],
];

function SignIn({ onSignedIn }) {
  const [error, setError] = useState('');
  const submit = async (e) => {
    e.preventDefault();
    const value = new FormData(e.target).get('token').trim();
    try {
      await api('/v1/catalog', {}, value);
      signIn(value);
      onSignedIn();
    } catch (err) {
      setError(err.status === 401 ? 'That token is not known to this server: check it and try again.' : `Sign-in failed: ${err.message}`);
    }
  };
  return html`<form class="signin" onSubmit=${submit}>
    <h1>Berth</h1>
    <label>Token <input name="token" type="password" autocomplete="off" required autofocus /></label>
    <button type="submit">Sign in</button>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    <p class="hint">The token is kept in this tab only.</p>
  </form>`;
}

const route = () => location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);

function App() {
  const [signedIn, setSignedIn] = useState(!!token());
  const [path, setPath] = useState(route());
  useEffect(() => {
    const onHash = () => setPath(route());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  if (!signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const out = () => {
    signOut();
    stopFeed();
    setSignedIn(false);
  };
  const [name, ...rest] = path;
  let body;
  if (name === 'executions' && rest[0]) body = html`<${ExecutionView} id=${rest[0]} />`;
  else if (name === 'timeline' && rest[0]) body = html`<${TimelineView} stream=${rest[0]} key=${rest[0]} />`;
  else {
    const [, , View] = views.find(([n]) => n === name) ?? views[0];
    body = html`<${View} />`;
  }
  return html`<header>
      <strong>Berth</strong>
      <nav>${views.map(([n, label]) => html`<a href="#/${n}" class=${name === n || (!name && n === 'environments') ? 'active' : ''}>${label}</a>`)}</nav>
      <button class="signout" onClick=${out}>Sign out</button>
    </header>
    <main>${body}</main>`;
}

render(html`<${App} />`, document.getElementById('root'));
