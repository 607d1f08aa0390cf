/**
 * One control plane (a real `berth serve`) and two Execution Hosts (`berth host`, one on a Unix socket, one on TLS
 * loopback with a self-signed certificate): environments on each run commands through the same HTTP API, with exact
 * output and exit codes, stdin and PTY resize over the execution WebSocket, and cancel; the processes run on the host
 * (its spool holds them), and no remote pid reaches the control plane's records. The host also replays output itself
 * over SSE in the gateway's frames.
 */
import { existsSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { interactiveCases } from '../fixtures/remote-execution.ts';
import { HOST_CREDENTIAL, startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { allocationReportSchema } from '../../schemas/events/allocation.ts';
import { HOST_PROTOCOL_VERSION, PROTOCOL_HEADER, wireReceiptSchema } from '../../schemas/host-protocol.ts';
import { SseParser, type ParsedSseEvent } from '../../src/client/sse-parser.ts';
import { HostClient } from '../../src/providers/remote/host-client.ts';

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

describe.each(['host-unix', 'host-tls'])('a remote environment on %s', (name) => {
  it('runs a command with exact output on both streams and its exit code', async () => {
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', 'printf "out\\n%s" "$0"; printf err >&2; exit 7', name]);
    const done = await finished(server, record.id);
    expect(done).toMatchObject({ status: 'exited', exitCode: 7 });
    expect(done.pid).toBeUndefined(); // a remote pid never reaches the control plane
    expect(await output(record.id)).toBe(`out\n${name}`);
    expect(await output(record.id, 'stderr')).toBe('err');
  });

  interactiveCases(() => server, () => environments[name]!);

  it('cancels a running command on the host', async () => {
    const record = await submit(server, environments[name]!, ['/bin/sh', '-c', 'echo started; exec sleep 300']);
    await running(server, record.id);
    await waitFor(() => output(record.id), { what: 'started', until: (t) => t === 'started\n', timeoutMs: 20_000 });
    // The running operation's spool is on the host (spool/<allocation>/<operation>), the control plane has none.
    // (An earlier case's spool may still be there: an execution is released after its record shows it finished.)
    expect(spooled(hosts.hosts[name]!.dataDir).map((entry) => entry.split('/')[1])).toContain(record.id);
    expect(spooled(server.dataDir)).toHaveLength(0);
    const cancel = await server.call(`/v1/executions/${record.id}/cancel`, { method: 'POST', body: {} });
    expect(cancel.status).toBeLessThan(300);
    const done = await finished(server, record.id);
    expect(done.status).toBe('cancelled');
    expect(await output(record.id)).toBe('started\n');
  });
});

describe('output replay from the host itself', () => {
  /** POST /v1/exec/follow over the host's socket: its events, parsed. */
  function follow(body: object, lastEventId?: string): Promise<ParsedSseEvent[]> {
    const host = hosts.hosts['host-unix']!;
    return new Promise((resolve, reject) => {
      const headers = {
        authorization: `Bearer ${HOST_CREDENTIAL}`,
        [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION),
        'content-type': 'application/json',
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      };
      const req = http.request({ socketPath: host.config.socket, path: '/v1/exec/follow', method: 'POST', headers }, (res) => {
        expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
        const parser = new SseParser();
        const events: ParsedSseEvent[] = [];
        res.on('data', (chunk: Buffer) => events.push(...parser.push(chunk.toString())));
        res.on('end', () => resolve(events));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }

  it('replays every byte in the gateway frames, ends with the receipt (no pid), and resumes by Last-Event-ID', async () => {
    const cfg = hosts.hosts['host-unix']!.config;
    const client = new HostClient({ name: 'host-unix', socketPath: cfg.socket!, credentialFile: cfg.credentialFile });
    const target = { environmentId: 'henv_replay', allocationId: 'halloc_replay', requestId: 'req_replay', generation: 1 };
    const report = await client.call('/v1/provider/allocate', { target, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
    const fenced = { ...target, incarnation: (report as { identity: { incarnation: string } }).identity.incarnation };
    const expected = `${Array.from({ length: 30000 }, (_, i) => i + 1).join('\n')}\n`;
    await client.call('/v1/exec/submit', { target: fenced, spec: { operationId: 'replayed', command: ['seq', '1', '30000'], env: { PATH: '/usr/bin:/bin' }, stdin: false } }, wireReceiptSchema);
    const events = await follow({ target: fenced, operationId: 'replayed' });
    const output = events.filter((e) => e.event === 'output');
    const bytes = (list: ParsedSseEvent[]) => Buffer.concat(list.map((e) => Buffer.from(JSON.parse(e.data).data, 'base64'))).toString();
    expect(output.length).toBeGreaterThan(1);
    expect(bytes(output)).toBe(expected);
    expect(output.every((e) => e.id === `stdout:${JSON.parse(e.data).cursor + Buffer.from(JSON.parse(e.data).data, 'base64').length}`)).toBe(true);
    const status = events.at(-1)!;
    expect(status.event).toBe('status');
    expect(JSON.parse(status.data)).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(JSON.parse(status.data).pid).toBeUndefined();
    const resumed = await follow({ target: fenced, operationId: 'replayed' }, output[0]!.id);
    expect(bytes(resumed.filter((e) => e.event === 'output'))).toBe(expected.slice(Number(output[0]!.id!.split(':')[1])));
    client.close();
  });
});
