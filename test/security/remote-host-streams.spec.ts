/**
 * The remote Execution Host's client certificates and WebSocket under attack: a host started with --tls-client-ca
 * refuses a caller with no certificate or one of another CA (typed, before anything runs) and admits the control
 * plane's; its WebSocket refuses a wrong credential and a stale generation as plain typed HTTP before any handshake
 * (nothing runs, no socket opens); a reader that stops reading is closed 1013 (or dropped) within the stall windows
 * while the host's memory stays bounded; and through the control plane a member cannot follow another tenant's
 * remote execution.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { allocationReportSchema } from '../../schemas/events/allocation.ts';
import { CALL_HEADER, HOST_PROTOCOL_VERSION, PROTOCOL_HEADER } from '../../schemas/host-protocol.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { HostClient, type RemoteHostConfig } from '../../src/providers/remote/host-client.ts';
import { RemoteExecutor } from '../../src/providers/remote/remote-executor.ts';
import { createEnvironment, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { HOST_CREDENTIAL, startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { selfSigned } from '../fixtures/self-signed.ts';
import { berth, cleanEnv, spawnBerth, type Running } from '../integration/cli-process.ts';

const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });

/** A CA and a client certificate it signed, in `dir`. */
function clientCa(dir: string, name: string): { ca: string; cert: string; key: string } {
  mkdirSync(dir, { recursive: true });
  const ca = join(dir, `${name}-ca.pem`);
  const caKey = join(dir, `${name}-ca.key`);
  const cert = join(dir, `${name}-client.pem`);
  const key = join(dir, `${name}-client.key`);
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', caKey, '-out', ca, '-days', '1', '-subj', `/CN=${name} client CA`]);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', `${cert}.csr`, '-subj', '/CN=control-plane']);
  openssl(['x509', '-req', '-in', `${cert}.csr`, '-CA', ca, '-CAkey', caKey, '-CAcreateserial', '-out', cert, '-days', '1']);
  return { ca, cert, key };
}

describe('a host started with --tls-client-ca (mTLS)', () => {
  let root: string;
  let host: Running;
  let url: string;
  let serverCert: string;
  let trusted: ReturnType<typeof clientCa>;
  let foreign: ReturnType<typeof clientCa>;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'berth-mtls-'));
    trusted = clientCa(join(root, 'pki'), 'trusted');
    foreign = clientCa(join(root, 'pki'), 'foreign');
    const tls = selfSigned(join(root, 'pki'));
    serverCert = tls.certPath;
    host = spawnBerth(['host', '--data-dir', join(root, 'data'), '--listen', '127.0.0.1:0', '--tls-cert', tls.certPath, '--tls-key', tls.keyPath, '--tls-client-ca', trusted.ca], cleanEnv());
    url = /listening on (\S+)/.exec(await host.waitForLine(/^Berth host listening on /, 60_000))![1]!;
  }, 120_000);

  afterAll(async () => {
    await host?.stop('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  const credential = () => {
    const file = join(root, 'credential');
    writeFileSync(file, `${HOST_CREDENTIAL}\n`, { mode: 0o600 });
    return file;
  };
  const clientOf = (config: Partial<RemoteHostConfig>) => new HostClient({ name: 'mtls', url, caFile: serverCert, ...config });
  const target = (allocationId: string) => ({ environmentId: 'henv_mtls', allocationId, requestId: `req-${allocationId}`, generation: 1 });
  const spooled = () => (existsSync(join(root, 'data', 'spool')) ? execFileSync('find', [join(root, 'data', 'spool'), '-mindepth', '2']).toString().trim() : '');

  it('admits the control plane by its certificate alone, and runs its command', async () => {
    const client = clientOf({ clientCertFile: trusted.cert, clientKeyFile: trusted.key });
    const report = await client.call('/v1/provider/allocate', { target: target('halloc_ok'), profile: { provider: 'remote', host: 'mtls' } }, allocationReportSchema);
    expect(report.status).toBe('ready');
    const executor = new RemoteExecutor(client, { ...target('halloc_ok'), incarnation: (report as { identity: { incarnation: string } }).identity.incarnation });
    let receipt = await executor.submit({ operationId: 'mtls-1', command: ['/bin/sh', '-c', 'echo over mtls'], env: commandEnv(), stdin: false });
    while (receipt.state !== 'exited') receipt = (await executor.waitForChange('mtls-1', 1000), await executor.status('mtls-1'));
    expect(receipt.exitCode).toBe(0);
    expect((await executor.read('mtls-1', 'stdout', 0)).data.toString()).toBe('over mtls\n');
    // A running command followed: its byte stream is a connection of its own, admitted by the same certificate.
    const plainReads = vi.spyOn(client, 'bytes');
    await executor.submit({ operationId: 'mtls-2', command: ['/bin/sh', '-c', 'seq 1 200000; sleep 0.5; seq 200001 300000'], env: commandEnv(), stdin: false });
    const parts: Buffer[] = [];
    let cursor = 0;
    for (;;) {
      const chunk = await executor.read('mtls-2', 'stdout', cursor, 1 << 20);
      parts.push(Buffer.from(chunk.data));
      cursor = chunk.next;
      if (chunk.closed) break;
      if (chunk.data.length === 0) await executor.waitForChange('mtls-2', 1000, { stdout: cursor });
    }
    expect(Buffer.concat(parts).toString().split('\n')[299_999]).toBe('300000');
    // Plain reads until output first appeared, then none: the tail (over mTLS) answered the rest.
    expect(plainReads.mock.calls.length).toBeLessThanOrEqual(3);
    client.close();
  });

  it('refuses no certificate and a certificate of another CA, typed, before anything runs', async () => {
    const before = spooled();
    const marker = join(root, 'never-ran');
    const submitCall = { target: target('halloc_ok'), spec: { operationId: 'mtls-refused', command: ['/bin/sh', '-c', `touch ${marker}`], env: {}, stdin: false } };
    for (const [config, reason] of [
      [{}, 'client_certificate_missing'],
      [{ clientCertFile: foreign.cert, clientKeyFile: foreign.key }, 'client_certificate_untrusted'],
      // The bearer credential is no way around the certificate.
      [{ clientCertFile: foreign.cert, clientKeyFile: foreign.key, credentialFile: credential() }, 'client_certificate_untrusted'],
    ] as const) {
      const client = clientOf(config);
      await expect(client.handshake()).rejects.toMatchObject({ code: 'unauthorized', detail: { reason } });
      client.close();
    }
    expect(existsSync(marker)).toBe(false);
    expect(spooled()).toBe(before);
  });

  it('refuses to start mTLS-only on a Unix socket, or a client CA without TLS', async () => {
    const socketOnly = await berth(['host', '--data-dir', join(root, 'never'), '--socket', join(root, 'never.sock'), '--tls-client-ca', trusted.ca], cleanEnv());
    expect(socketOnly.code).toBe(2);
    expect(socketOnly.stderr).toMatch(/--tls-client-ca needs --listen/);
    const socketAndTls = await berth(['host', '--data-dir', join(root, 'never'), '--socket', join(root, 'never.sock'), '--listen', '127.0.0.1:0', '--tls-cert', serverCert, '--tls-key', join(root, 'pki', 'key.pem'), '--tls-client-ca', trusted.ca], cleanEnv());
    expect(socketAndTls.code).toBe(1);
    expect(socketAndTls.stderr).toMatch(/needs --credential FILE/);
    expect(existsSync(join(root, 'never'))).toBe(false);
  });
});

describe('the host WebSocket under attack', () => {
  let hosts: TestHosts;
  let client: HostClient;
  let socket: string;
  const base = { environmentId: 'henv_wsec', requestId: 'req-wsec', allocationId: 'halloc_wsec', generation: 1 };
  let incarnation: string;

  beforeAll(async () => {
    hosts = await startHosts(['unix']);
    socket = hosts.hosts['host-unix']!.config.socket!;
    client = new HostClient({ name: 'host-unix', socketPath: socket, credentialFile: hosts.credentialFile });
    const report = await client.call('/v1/provider/allocate', { target: base, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
    incarnation = (report as { identity: { incarnation: string } }).identity.incarnation;
  }, 120_000);

  afterAll(async () => {
    client?.close();
    await hosts?.close();
  });

  /** Opens the host's WebSocket; answers the HTTP refusal (status and typed body) when the upgrade is refused. */
  function upgrade(call: object, credential = HOST_CREDENTIAL): Promise<{ ws?: WebSocket; status?: number; error?: any }> {
    const ws = new WebSocket(`ws+unix:${socket}:/v1/exec/follow`, {
      headers: { authorization: `Bearer ${credential}`, [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION), [CALL_HEADER]: JSON.stringify(call) },
    });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve({ ws }));
      ws.once('unexpected-response', (_req, res) => {
        const parts: Buffer[] = [];
        res.on('data', (p: Buffer) => parts.push(p));
        res.on('end', () => resolve({ status: res.statusCode, error: JSON.parse(Buffer.concat(parts).toString()).error }));
      });
      ws.once('error', reject);
    });
  }

  it('a wrong credential and a stale generation: refused as typed HTTP, no socket, nothing cancelled or read', async () => {
    const executor = new RemoteExecutor(client, { ...base, incarnation });
    await executor.submit({ operationId: 'wsec-1', command: ['/bin/sh', '-c', 'echo secret-output; sleep 2'], env: commandEnv(), stdin: false });
    const wrong = await upgrade({ target: { ...base, incarnation }, operationId: 'wsec-1' }, 'not-the-credential-0123456789');
    expect(wrong).toMatchObject({ status: 401, error: { code: 'unauthorized' } });
    // The refused upgrade touched nothing: the command runs to its own end.
    let receipt = await executor.status('wsec-1');
    while (receipt.state !== 'exited') receipt = (await executor.waitForChange('wsec-1', 1000), await executor.status('wsec-1'));
    expect(receipt).toMatchObject({ exitCode: 0 });
    expect(receipt.cancelled).toBeFalsy();
    // A newer generation of the environment makes generation 1 stale.
    await client.call('/v1/provider/allocate', { target: { ...base, allocationId: 'halloc_wsec2', requestId: 'req-wsec2', generation: 2 }, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
    const stale = await upgrade({ target: { ...base, incarnation }, operationId: 'wsec-1' });
    expect(stale).toMatchObject({ status: 409, error: { code: 'stale_target', detail: { reason: 'stale_generation' } } });
    const foreign = await upgrade({ target: { ...base, generation: 2, allocationId: 'halloc_wsec2', requestId: 'req-wsec2', incarnation: 'hinc_other' }, operationId: 'wsec-1' });
    expect(foreign).toMatchObject({ error: { code: 'stale_target', detail: { reason: 'foreign_incarnation' } } });
    expect(JSON.stringify([wrong, stale, foreign])).not.toContain('secret-output');
  });

  it('a reader that stops reading is closed (1013) or dropped, and the host holds no more than its bound', async () => {
    const target = { ...base, allocationId: 'halloc_wsec2', requestId: 'req-wsec2', generation: 2, incarnation };
    const executor = new RemoteExecutor(client, target);
    // Far more output than any buffer: a host that buffered it for the reader would grow by hundreds of MiB.
    await executor.submit({ operationId: 'wsec-flood', command: ['head', '-c', String(512 << 20), '/dev/zero'], env: commandEnv(), stdin: false });
    const opened = await upgrade({ target, operationId: 'wsec-flood' });
    const ws = opened.ws!;
    let received = 0;
    ws.on('message', (data: Buffer) => (received += data.length));
    const closed = new Promise<number>((resolve) => ws.on('close', resolve));
    // Stop reading: the host's writes back up into the socket buffers and then its own bound.
    const raw = (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    raw.pause();
    const pid = hosts.hosts['host-unix']!.process.child.pid!;
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 100);
    // The stall window (10 s) for the 1013, one more before the socket is dropped, and a margin for a loaded machine.
    await new Promise((resolve) => setTimeout(resolve, 25_000));
    clearInterval(sampler);
    raw.resume();
    // What the host had sent before it gave up arrives, then the close: the 1013 frame, or the drop.
    const code = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 10_000))]);
    ws.terminate();
    expect([1013, 1006]).toContain(code);
    expect(received).toBeLessThan(32 << 20);
    expect(peak).toBeLessThan(400 << 20);
    // A disconnect never cancels: the command goes on to its own exit.
    let receipt = await executor.status('wsec-flood');
    while (receipt.state !== 'exited') receipt = (await executor.waitForChange('wsec-flood', 1000), await executor.status('wsec-flood'));
    expect(receipt).toMatchObject({ exitCode: 0 });
    expect(receipt.cancelled).toBeFalsy();
  }, 90_000);
});

describe('through the control plane', () => {
  let hosts: TestHosts;
  let server: BerthServer;
  beforeAll(async () => {
    hosts = await startHosts(['unix']);
    server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0' });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    await hosts?.close();
  });

  it("a member cannot follow another tenant's remote execution (WebSocket or output)", async () => {
    const environment = await createEnvironment(server, tokens.alice, { provider: 'remote', host: 'host-unix' });
    const execution = await submit(server, environment, ['/bin/sh', '-c', 'echo alice-private; sleep 2']);
    await running(server, execution.id);
    const output = await server.call(`/v1/executions/${execution.id}/output?stream=stdout`, { token: tokens.bob });
    expect(output.status).toBe(404);
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/executions/${execution.id}/stream`, { headers: { authorization: `Bearer ${tokens.bob}` } });
    ws.on('error', () => undefined); // the refusal ends the handshake
    const status = await new Promise<number>((resolve) => {
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
      ws.once('open', () => resolve(101));
    });
    ws.terminate();
    expect(status).toBe(404);
  });
});
