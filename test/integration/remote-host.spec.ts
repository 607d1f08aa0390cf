/**
 * One control plane (a real `berth serve`) and two Execution Hosts (`berth host`, one on a Unix socket, one on TLS
 * loopback with a self-signed certificate): environments on each run commands through the same HTTP API, with exact
 * output and exit codes, stdin and PTY resize over the execution WebSocket, and cancel; the processes run on the host
 * (its spool holds them), and no remote pid reaches the control plane's records.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { decodeOutputFrame } from '../../schemas/ws-frames.ts';

let hosts: TestHosts;
let server: BerthServer;
const environments: Record<string, string> = {};

beforeAll(async () => {
  hosts = await startHosts(['unix', 'tls']);
  server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0' });
  for (const name of Object.keys(hosts.hosts)) environments[name] = await createEnvironment(server, tokens.alice, { provider: 'remote', host: name });
}, 180_000);

afterAll(async () => {
  await server?.close();
  await hosts?.close();
});

async function output(id: string, stream = 'stdout'): Promise<string> {
  const response = await server.call(`/v1/executions/${id}/output?stream=${stream}`);
  expect(response.status).toBe(200);
  return response.text();
}

/** The operations spooled under `dataDir`, of every allocation. */
function spooled(dataDir: string): string[] {
  const spools = join(dataDir, 'spool');
  if (!existsSync(spools)) return [];
  return readdirSync(spools).flatMap((a) => readdirSync(join(spools, a)).filter((n) => !n.startsWith('.')).map((n) => `${a}/${n}`));
}

/** Opens the execution's WebSocket and collects its output frames until the server closes it. */
function stream(id: string) {
  const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/executions/${id}/stream`, { headers: { authorization: `Bearer ${tokens.alice}` } });
  const bytes: Buffer[] = [];
  ws.on('message', (data: Buffer, binary) => binary && bytes.push(Buffer.from(decodeOutputFrame(data).data)));
  const closed = new Promise<number>((resolve, reject) => ws.on('close', resolve).on('error', reject));
  const open = new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  return { ws, open, closed, text: () => Buffer.concat(bytes).toString() };
}

describe.each(['host-unix', 'host-tls'])('a remote environment on %s', (name) => {
  it('runs a command with exact output on both streams and its exit code', async () => {
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', 'printf "out\\n%s" "$0"; printf err >&2; exit 7', name]);
    const done = await finished(server, record.id);
    expect(done).toMatchObject({ status: 'exited', exitCode: 7 });
    expect(done.pid).toBeUndefined(); // a remote pid never reaches the control plane
    expect(await output(record.id)).toBe(`out\n${name}`);
    expect(await output(record.id, 'stderr')).toBe('err');
  });

  it('takes stdin over the WebSocket and ends it', async () => {
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', 'tr a-z A-Z'], { stdin: true });
    const s = stream(record.id);
    await s.open;
    s.ws.send(Buffer.from('hello remote\n'));
    s.ws.send(JSON.stringify({ type: 'end' }));
    expect(await s.closed).toBe(1000);
    expect(s.text()).toBe('HELLO REMOTE\n');
    expect(await finished(server, record.id)).toMatchObject({ status: 'exited', exitCode: 0 });
  });

  it('gives a PTY its size and follows a resize', async () => {
    const script = 'stty size; trap "stty size; exit 3" WINCH; while :; do sleep 0.05; done';
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', script], { pty: { cols: 80, rows: 24 } });
    const s = stream(record.id);
    await s.open;
    await waitFor(() => s.text(), { what: 'the first size', until: (t) => t.includes('24 80'), timeoutMs: 20_000 });
    s.ws.send(JSON.stringify({ type: 'resize', cols: 132, rows: 50 }));
    expect(await s.closed).toBe(1000);
    expect(s.text()).toMatch(/24 80\r?\n[\s\S]*50 132/);
    expect(await finished(server, record.id)).toMatchObject({ status: 'exited', exitCode: 3 });
  });

  it('cancels a running command on the host', async () => {
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', 'echo started; exec sleep 300']);
    await running(server, record.id);
    await waitFor(() => output(record.id), { what: 'started', until: (t) => t === 'started\n', timeoutMs: 20_000 });
    // The running operation's spool is on the host (spool/<allocation>/<operation>), the control plane has none.
    expect(spooled(hosts.hosts[name]!.dataDir)).toHaveLength(1);
    expect(spooled(server.dataDir)).toHaveLength(0);
    const cancel = await server.call(`/v1/executions/${record.id}/cancel`, { method: 'POST', body: {} });
    expect(cancel.status).toBeLessThan(300);
    const done = await finished(server, record.id);
    expect(done.status).toBe('cancelled');
    expect(await output(record.id)).toBe('started\n');
  });
});
