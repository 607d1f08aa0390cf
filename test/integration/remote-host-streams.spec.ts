/**
 * What the remote Execution Host serves beyond the calls (issue 16): an output stream as raw bytes from a byte offset
 * (what the control plane follows output with), output replayed over WebSocket in the gateway's frames with input
 * forwarded and a disconnect that never cancels; and, through a real control plane, a profile naming an unknown host
 * refused at create, and a host replaced behind its back (data directory wiped: another incarnation) whose running
 * execution ends `unknown`, never `exited` nor resubmitted, while new work runs on the new incarnation.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { allocationReportSchema } from '../../schemas/events/allocation.ts';
import { CALL_HEADER, HOST_PROTOCOL_VERSION, PROTOCOL_HEADER } from '../../schemas/host-protocol.ts';
import { decodeOutputFrame } from '../../schemas/ws-frames.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { HostClient } from '../../src/providers/remote/host-client.ts';
import { RemoteExecutor } from '../../src/providers/remote/remote-executor.ts';
import { createEnvironment, finished, running, startServer, submit, type BerthServer } from '../e2e/berth-server.ts';
import { HOST_CREDENTIAL, startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';

let hosts: TestHosts;
let client: HostClient;
let executor: RemoteExecutor;
let target: { environmentId: string; allocationId: string; requestId: string; generation: number; incarnation: string };
const env = commandEnv();

beforeAll(async () => {
  hosts = await startHosts(['unix']);
  client = new HostClient({ name: 'host-unix', socketPath: hosts.hosts['host-unix']!.config.socket!, credentialFile: hosts.credentialFile });
  const base = { environmentId: 'henv_streams', allocationId: 'halloc_streams', requestId: 'req_streams', generation: 1 };
  const report = await client.call('/v1/provider/allocate', { target: base, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
  if (report.status !== 'ready') throw new Error(`allocate: ${report.status}`);
  target = { ...base, incarnation: report.identity.incarnation! };
  executor = new RemoteExecutor(client, target);
}, 120_000);

afterAll(async () => {
  client?.close();
  await hosts?.close();
});

let n = 0;
async function start(command: string[], stdin = false): Promise<string> {
  const operationId = `streams-${++n}`;
  await executor.submit({ operationId, command, env, stdin });
  return operationId;
}

/** POST /v1/exec/stream raw: the body's bytes and whether it ended cleanly. */
function rawStream(operationId: string, cursor: number): Promise<{ status: number; body: Buffer; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: hosts.hosts['host-unix']!.config.socket!,
        path: '/v1/exec/stream',
        method: 'POST',
        headers: { authorization: `Bearer ${HOST_CREDENTIAL}`, [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION), 'content-type': 'application/json' },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (p: Buffer) => parts.push(p));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(parts), complete: res.complete }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ target, operationId, stream: 'stdout', cursor }));
  });
}

describe('the raw byte stream of an output', () => {
  it('is the stream from the byte offset asked, ended cleanly once the command exited', async () => {
    // 3 MiB written in pieces over ~1 s, so the body is read while the command still writes.
    const id = await start(['/bin/sh', '-c', 'for i in 1 2 3; do head -c 1048576 /dev/zero | tr "\\0" "$i"; sleep 0.3; done']);
    const whole = await rawStream(id, 0);
    expect(whole).toMatchObject({ status: 200, complete: true });
    expect(whole.body.length).toBe(3 << 20);
    expect([whole.body[0], whole.body[(1 << 20) + 5], whole.body[(3 << 20) - 1]]).toEqual([0x31, 0x32, 0x33]);
    const resumed = await rawStream(id, (2 << 20) + 7);
    expect(resumed.body.length).toBe((1 << 20) - 7);
    expect(resumed.body.every((b) => b === 0x33)).toBe(true);
  });

  it('follows a writing command through the executor with every byte in order, reads costing no request each', async () => {
    const id = await start(['/bin/sh', '-c', 'seq 1 400000; sleep 0.2; seq 400001 500000']);
    const parts: Buffer[] = [];
    let cursor = 0;
    for (;;) {
      const chunk = await executor.read(id, 'stdout', cursor, 1 << 20);
      parts.push(Buffer.from(chunk.data));
      cursor = chunk.next;
      if (chunk.closed) break;
      if (chunk.data.length === 0) await executor.waitForChange(id, 1000, { stdout: cursor });
    }
    const lines = Buffer.concat(parts).toString().split('\n');
    expect(lines.length).toBe(500_001);
    expect(lines[0]).toBe('1');
    expect(lines[499_999]).toBe('500000');
    // The tail answered the reads: the host's own read at any cursor agrees with what was followed.
    expect((await executor.read(id, 'stdout', cursor - 7, 100)).data.toString()).toBe('500000\n');
  });

  it('keeps every byte in order when the reader lags past what the tail holds (the connection paused, then resumed)', async () => {
    // About 21 MiB, well past the tail's 8 MiB: the tail pauses its connection while the reader sleeps.
    const id = await start(['seq', '1', '3000000']);
    const plainReads = vi.spyOn(client, 'bytes');
    const parts: Buffer[] = [];
    let cursor = 0;
    let opened: number | undefined;
    for (;;) {
      const chunk = await executor.read(id, 'stdout', cursor, 1 << 20);
      parts.push(Buffer.from(chunk.data));
      cursor = chunk.next;
      if (chunk.closed) break;
      // The first read with bytes opens the tail: the reader then sleeps while the command writes on.
      if (opened === undefined && chunk.data.length > 0) {
        opened = plainReads.mock.calls.length;
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
      if (chunk.data.length === 0) await executor.waitForChange(id, 1000, { stdout: cursor });
    }
    const lines = Buffer.concat(parts).toString().split('\n');
    expect(lines.length).toBe(3_000_001);
    expect(lines.every((line, i) => i === 3_000_000 || line === String(i + 1))).toBe(true);
    // No plain read after the one that opened the tail: resumed, it answered every other (left paused, it would die silent).
    expect(plainReads).toHaveBeenCalledTimes(opened!);
    plainReads.mockRestore();
  });
});

/** A WebSocket on the host for one operation: its frames, texts and close code. */
function hostSocket(operationId: string, headers: Record<string, string> = {}) {
  const call = JSON.stringify({ target, operationId, cursors: { stdout: 0 } });
  const ws = new WebSocket(`ws+unix:${hosts.hosts['host-unix']!.config.socket!}:/v1/exec/follow`, {
    headers: { authorization: `Bearer ${HOST_CREDENTIAL}`, [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION), [CALL_HEADER]: call, ...headers },
  });
  const bytes: Buffer[] = [];
  const texts: any[] = [];
  ws.on('message', (data: Buffer, binary) => (binary ? bytes.push(Buffer.from(decodeOutputFrame(data).data)) : texts.push(JSON.parse(data.toString()))));
  const closed = new Promise<number>((resolve, reject) => ws.on('close', resolve).on('error', reject));
  const open = new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  return { ws, open, closed, texts, text: () => Buffer.concat(bytes).toString() };
}

describe('the host WebSocket', () => {
  it('replays output in the gateway frames, forwards stdin, and closes 1000 after the final status', async () => {
    const id = await start(['/bin/sh', '-c', 'echo before; cat; echo after'], true);
    const s = hostSocket(id);
    await s.open;
    s.ws.send(Buffer.from('from the socket\n'));
    s.ws.send(JSON.stringify({ type: 'end' }));
    expect(await s.closed).toBe(1000);
    expect(s.text()).toBe('before\nfrom the socket\nafter\n');
    expect(s.texts.at(-1)).toMatchObject({ type: 'status', state: 'exited', exitCode: 0 });
    expect(s.texts.at(-1).pid).toBeUndefined();
  });

  it('never cancels the command when the client goes away', async () => {
    const id = await start(['/bin/sh', '-c', 'echo one; sleep 1; echo two']);
    const s = hostSocket(id);
    await s.open;
    await waitFor(() => s.text(), { what: 'the first line', until: (t) => t.includes('one'), timeoutMs: 10_000 });
    s.ws.terminate();
    const receipt = await waitFor(() => executor.status(id), { what: 'the exit', until: (r) => r.state === 'exited', timeoutMs: 15_000 });
    expect(receipt).toMatchObject({ exitCode: 0 });
    expect(receipt.cancelled).toBeFalsy();
    expect((await executor.read(id, 'stdout', 0)).data.toString()).toBe('one\ntwo\n');
  });
});

describe('through a control plane', () => {
  let server: BerthServer;
  beforeAll(async () => {
    server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0', BERTH_MAINTENANCE_MS: '500' });
  }, 120_000);
  afterAll(async () => server?.close());

  it('refuses at create a profile naming an unknown host, naming the field', async () => {
    const response = await server.call('/v1/environments', { body: { name: 'nowhere', profile: { provider: 'remote', host: 'no-such-host' } } });
    expect(response.status).toBe(400);
    const { error } = await response.json();
    expect(error).toMatchObject({ code: 'invalid_request', detail: { field: 'profile.host', host: 'no-such-host', hosts: ['host-unix'] } });
    expect(await server.json<unknown[]>('/v1/environments')).toEqual([]);
  });

  it('a replaced host: the running execution ends unknown (never exited, never resubmitted), new work runs on the new incarnation', async () => {
    const host = hosts.hosts['host-unix']!;
    const environment = await createEnvironment(server, undefined, { provider: 'remote', host: 'host-unix' });
    const before = await submit(server, environment, ['/bin/sh', '-c', 'echo started; sleep 30; echo never']);
    await running(server, before.id);
    const oldIncarnation = (await client.handshake()).incarnation;
    await host.restart('SIGKILL', { wipe: true });
    const record = await finished(server, before.id);
    expect(record.status).toBe('unknown');
    expect(record.exitCode ?? null).toBeNull();
    const fresh = new HostClient(client.config);
    const newIncarnation = (await fresh.handshake()).incarnation;
    fresh.close();
    expect(newIncarnation).not.toBe(oldIncarnation);
    // The replaced host's allocation is found lost (a submit before that is refused stale_target before anything runs:
    // it names the old host's allocation); the next submit allocates again, on the new incarnation.
    type Allocation = { state: string; identity?: { incarnation?: string } };
    const allocationsNow = () => server.json<Allocation[]>(`/v1/environments/${environment}/allocations`);
    await waitFor(allocationsNow, { what: 'the old allocation lost', until: (all) => all.some((a) => a.state === 'lost'), timeoutMs: 30_000 });
    // Nothing of the old operation ran again on the new host; new work runs there.
    const after = await submit(server, environment, ['/bin/sh', '-c', 'echo again']);
    expect(await finished(server, after.id)).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await allocationsNow()).some((a) => a.state === 'ready' && a.identity?.incarnation === newIncarnation)).toBe(true);
  }, 120_000);
});
