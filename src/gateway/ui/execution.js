/**
 * One execution: its record, links to its actors' timelines (execution → allocation → environment), and its output
 * live in a terminal emulator (xterm) from the output SSE route. The per-stream cursors go back to the server on
 * every reconnection (Last-Event-ID and ?stdout=&stderr=&pty=), so a drop loses no byte and repeats none.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { Terminal } from '@xterm/xterm';
import { api, followSse } from './api.js';
import { html } from './html.js';
import { ErrorLine, finished, time, timelineLink } from './format.js';

const decode = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
const RED = new TextEncoder().encode('\x1b[31m');
const RESET = new TextEncoder().encode('\x1b[0m');

export function ExecutionView({ id }) {
  const [record, setRecord] = useState();
  const [error, setError] = useState();
  const [bytes, setBytes] = useState(0);
  const screen = useRef();
  useEffect(() => {
    api(`/v1/executions/${id}`).then(setRecord, setError);
  }, [id]);
  useEffect(() => {
    if (!record) return;
    const term = new Terminal({ convertEol: true, rows: 24, cols: 100, disableStdin: true, scrollback: 5000 });
    term.open(screen.current);
    const cursors = { stdout: 0, stderr: 0, pty: 0 };
    const abort = new AbortController();
    const path = () => `/v1/executions/${id}/events?stdout=${cursors.stdout}&stderr=${cursors.stderr}&pty=${cursors.pty}`;
    // Every (re)connection asks from the cursors reached; a chunk that overlaps them is trimmed, never written twice.
    followSse(path, {
      signal: abort.signal,
      onError: setError,
      onEvent: (e) => {
        const message = JSON.parse(e.data);
        if (e.event === 'status') {
          setRecord(message);
          return finished(message) ? 'stop' : undefined;
        }
        if (e.event !== 'output') return;
        const chunk = decode(message.data);
        const fresh = chunk.subarray(Math.max(0, cursors[message.stream] - message.cursor));
        if (fresh.length === 0) return;
        cursors[message.stream] = message.cursor + chunk.length;
        // A terminal's output carries its own line endings; plain streams need \n as a new line.
        if (message.stream === 'pty') term.options.convertEol = false;
        term.write(message.stream === 'stderr' ? new Uint8Array([...RED, ...fresh, ...RESET]) : fresh);
        setBytes(cursors.stdout + cursors.stderr + cursors.pty);
      },
    });
    return () => {
      abort.abort();
      term.dispose();
    };
  }, [record?.id]);
  const cancel = () => api(`/v1/executions/${id}/cancel`, { method: 'POST' }).then(setRecord, setError);
  return html`<h2>Execution <code>${id}</code></h2>
    <${ErrorLine} error=${error} />
    ${record &&
    html`<dl class="record">
      <dt>status</dt><dd class="state" data-status=${record.status}>${record.status}${record.exitCode !== undefined ? ` (exit ${record.exitCode})` : ''}</dd>
      <dt>command</dt><dd><code>${Array.isArray(record.command) ? record.command.join(' ') : record.command}</code></dd>
      <dt>actors</dt><dd>${timelineLink('execution', id, 'execution')} → ${timelineLink('allocation', record.target?.allocationId, 'allocation')} → ${timelineLink('environment', record.target?.environmentId, 'environment')}</dd>
      <dt>created</dt><dd>${time(record.createdAt)}</dd>
      <dt>output</dt><dd data-bytes=${bytes}>${bytes} bytes</dd>
    </dl>
    ${!finished(record) && html`<button onClick=${cancel}>Cancel</button>`}`}
    <div class="terminal" ref=${screen}></div>`;
}
