/**
 * The Execution Host refuses before anything runs: a plaintext listener off loopback (nothing made), a wrong
 * credential, a protocol mismatch (host side, by header, and client side, by hello), a stale generation and a
 * foreign incarnation, each with its typed error and no spool entry; ids that would name `.`, `..` or a dot file
 * under the host's directories are refused before any is made. The credential appears in no command's
 * environment (`env`, /proc/<pid>/environ), no log line of either process and no file of either data directory
 * (events included).
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthError } from '../../schemas/errors.ts';
import { allocationReportSchema } from '../../schemas/events/allocation.ts';
import { HOST_PROTOCOL_VERSION, PROTOCOL_HEADER, wireReceiptSchema } from '../../schemas/host-protocol.ts';
import { HostClient } from '../../src/providers/remote/host-client.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { HOST_CREDENTIAL, startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';

let hosts: TestHosts;
let socket: string;
let client: HostClient;

beforeAll(async () => {
  hosts = await startHosts(['unix']);
  socket = hosts.hosts['host-unix']!.config.socket!;
  client = new HostClient({ name: 'host-unix', socketPath: socket, credentialFile: hosts.credentialFile });
}, 120_000);

afterAll(async () => {
  client?.close();
  await hosts?.close();
});

/** One raw call over the host's socket, with the headers given (no client-side check in the way). */
function raw(path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request({ socketPath: socket, path, method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (p: Buffer) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(parts).toString()) }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const allocationIds = new Set<string>();
async function allocate(environmentId: string, allocationId: string, generation: number): Promise<string> {
  allocationIds.add(allocationId);
  const report = await client.call('/v1/provider/allocate', { target: { environmentId, allocationId, requestId: `req-${allocationId}`, generation }, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
  expect(report.status).toBe('ready');
  return (report as { identity: { incarnation: string } }).identity.incarnation;
}

/** A submit that would leave `marker` behind if it ran. */
const submitBody = (target: object, marker: string) => ({
  target,
  spec: { operationId: `op-${Math.random().toString(36).slice(2)}`, command: ['/bin/sh', '-c', `touch ${marker}`], env: { PATH: '/usr/bin:/bin' }, stdin: false },
});

/** `read()`, or undefined when what it reads is gone (ENOENT). */
const unlessGone = <T>(read: () => T): T | undefined => {
  try {
    return read();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
};

/**
 * Every file under `dir` that is there when the walk reaches it. The host removes a command's spool once its output
 * is saved, which may still be under way after the execution is seen finished: what goes meanwhile is passed over.
 */
function* filesUnder(dir: string): Generator<string> {
  for (const entry of unlessGone(() => readdirSync(dir, { withFileTypes: true })) ?? []) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesUnder(path);
    else if (entry.isFile()) yield path;
  }
}

const spooledOperations = () => {
  const spools = join(hosts.hosts['host-unix']!.dataDir, 'spool');
  return existsSync(spools) ? readdirSync(spools).flatMap((a) => readdirSync(join(spools, a))) : [];
};

describe('berth host refuses before anything runs', () => {
  it('a plaintext listener off loopback: exit 1, typed message, no data directory made', async () => {
    const dataDir = join(hosts.root, 'never');
    const run = await berth(['host', '--listen', '0.0.0.0:0', '--credential', hosts.credentialFile, '--data-dir', dataDir], cleanEnv());
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/not loopback\) needs --tls-cert and --tls-key/);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('a credential file others may read, or none: refused, no data directory made', async () => {
    const dataDir = join(hosts.root, 'never-either');
    const loose = join(hosts.root, 'loose-credential');
    writeFileSync(loose, `${HOST_CREDENTIAL}\n`, { mode: 0o644 });
    const run = await berth(['host', '--socket', join(hosts.root, 'loose.sock'), '--credential', loose, '--data-dir', dataDir], cleanEnv());
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/may be read by others: make it mode 0600/);
    expect(run.stderr).not.toContain(HOST_CREDENTIAL);
    const none = await berth(['host', '--socket', join(hosts.root, 'none.sock'), '--data-dir', dataDir], cleanEnv());
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--credential FILE is required/);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('serves its socket with mode 0600', () => {
    expect(statSync(socket).mode & 0o777).toBe(0o600);
  });

  it('a wrong or missing credential: 401 unauthorized, nothing dispatched', async () => {
    const incarnation = await allocate('henv_sec1', 'halloc_sec1', 1);
    const marker = join(hosts.root, 'wrong-credential');
    const target = { environmentId: 'henv_sec1', allocationId: 'halloc_sec1', requestId: 'req-halloc_sec1', generation: 1, incarnation };
    for (const authorization of ['Bearer not-the-credential-at-all', '', `Bearer ${HOST_CREDENTIAL}x`]) {
      const answer = await raw('/v1/exec/submit', submitBody(target, marker), { authorization, [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION) });
      expect(answer.status).toBe(401);
      expect(answer.json.error.code).toBe('unauthorized');
      expect(JSON.stringify(answer.json)).not.toContain(HOST_CREDENTIAL);
    }
    const wrongFile = join(hosts.root, 'wrong-credential-file');
    writeFileSync(wrongFile, 'a-credential-of-another-host-123\n', { mode: 0o600 });
    const stranger = new HostClient({ name: 'host-unix', socketPath: socket, credentialFile: wrongFile });
    await expect(stranger.handshake()).rejects.toMatchObject({ code: 'unauthorized' });
    stranger.close();
    expect(existsSync(marker)).toBe(false);
  });

  it("ids that name a directory's own entries ('.', '..', a dot file): invalid_request, nothing made outside", async () => {
    const hostData = hosts.hosts['host-unix']!.dataDir;
    const listing = () => readdirSync(join(hostData, 'host')).sort();
    const before = listing();
    const headers = { authorization: `Bearer ${HOST_CREDENTIAL}`, [PROTOCOL_HEADER]: String(HOST_PROTOCOL_VERSION) };
    for (const bad of ['..', '.', '.hidden']) {
      for (const field of ['environmentId', 'allocationId', 'requestId'] as const) {
        const target = { environmentId: 'henv_dots', allocationId: 'halloc_dots', requestId: 'req-dots', generation: 1, [field]: bad };
        const answer = await raw('/v1/provider/allocate', { target, profile: { provider: 'remote', host: 'host-unix' } }, headers);
        expect(answer.status, `${field} ${bad}`).toBe(400);
        expect(answer.json.error.code).toBe('invalid_request');
      }
    }
    expect(listing()).toEqual(before);
  });

  it('a protocol mismatch: refused by the host from the header, and by the client from the hello', async () => {
    const incarnation = await allocate('henv_sec2', 'halloc_sec2', 1);
    const marker = join(hosts.root, 'mismatch');
    const target = { environmentId: 'henv_sec2', allocationId: 'halloc_sec2', requestId: 'req-halloc_sec2', generation: 1, incarnation };
    const before = spooledOperations().length;
    for (const version of [String(HOST_PROTOCOL_VERSION + 1), '0', undefined]) {
      const headers: Record<string, string> = { authorization: `Bearer ${HOST_CREDENTIAL}`, ...(version ? { [PROTOCOL_HEADER]: version } : {}) };
      const answer = await raw('/v1/exec/submit', submitBody(target, marker), headers);
      expect(answer.status).toBe(400);
      expect(answer.json.error).toMatchObject({ code: 'invalid_request', detail: { reason: 'protocol_mismatch', host: HOST_PROTOCOL_VERSION } });
    }
    const future = new HostClient({ name: 'host-unix', socketPath: socket, credentialFile: hosts.credentialFile }, HOST_PROTOCOL_VERSION + 1);
    const refused = await future.call('/v1/exec/submit', submitBody(target, marker), wireReceiptSchema).catch((e) => e);
    expect(refused).toBeInstanceOf(BerthError);
    expect(refused).toMatchObject({ code: 'invalid_request', detail: { reason: 'protocol_mismatch', hostProtocol: HOST_PROTOCOL_VERSION } });
    future.close();
    expect(existsSync(marker)).toBe(false);
    expect(spooledOperations().length).toBe(before);
  });

  it('a stale generation and a foreign incarnation: stale_target, nothing started', async () => {
    const incarnation = await allocate('henv_sec3', 'halloc_sec3a', 1);
    await allocate('henv_sec3', 'halloc_sec3b', 2);
    const marker = join(hosts.root, 'stale');
    const before = spooledOperations().length;
    const old = { environmentId: 'henv_sec3', allocationId: 'halloc_sec3a', requestId: 'req-halloc_sec3a', generation: 1, incarnation };
    await expect(client.call('/v1/exec/submit', submitBody(old, marker), wireReceiptSchema)).rejects.toMatchObject({ code: 'stale_target', detail: { reason: 'stale_generation', newest: 2 } });
    // An allocation made again under an older generation is refused as well.
    await expect(allocate('henv_sec3', 'halloc_sec3c', 1)).rejects.toMatchObject({ code: 'stale_target' });
    const current = { environmentId: 'henv_sec3', allocationId: 'halloc_sec3b', requestId: 'req-halloc_sec3b', generation: 2 };
    await expect(client.call('/v1/exec/submit', submitBody({ ...current, incarnation: 'hinc_another' }, marker), wireReceiptSchema)).rejects.toMatchObject({
      code: 'stale_target',
      detail: { reason: 'foreign_incarnation' },
    });
    await expect(client.call('/v1/exec/submit', submitBody(current, marker), wireReceiptSchema)).rejects.toMatchObject({ code: 'stale_target' });
    expect(existsSync(marker)).toBe(false);
    expect(spooledOperations().length).toBe(before);
    // The fence is not a refusal of everything: the current target runs.
    const ran = await client.call('/v1/exec/submit', { ...submitBody({ ...current, incarnation }, marker), spec: { ...submitBody(current, marker).spec, settleMs: 2000 } }, wireReceiptSchema);
    expect(ran.state).toBe('exited');
    expect(existsSync(marker)).toBe(true);
  });
});

describe('the host credential stays private', () => {
  let server: BerthServer;
  beforeAll(async () => {
    server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0', BERTH_LOG_LEVEL: 'debug' });
  }, 120_000);
  afterAll(() => server?.close());

  it('is in no command environment, no log and no stored file of either side', async () => {
    for (const token of [tokens.admin, tokens.alice]) {
      const environment = await createEnvironment(server, token, { provider: 'remote', host: 'host-unix' });
      const record = await submit(server, environment, ['/bin/sh', '-c', 'env; echo ---; tr "\\0" "\\n" < /proc/$$/environ; echo ---; cat /proc/$PPID/environ | tr "\\0" "\\n"'], {}, token);
      const done = await finished(server, record.id, token);
      expect(done.status).toBe('exited');
      const out = await (await server.call(`/v1/executions/${record.id}/output?stream=stdout`, { token })).text();
      expect(out).toContain('PATH=');
      expect(out).not.toContain(HOST_CREDENTIAL);
    }
    const host = hosts.hosts['host-unix']!;
    expect(readFileSync(`/proc/${host.process.child.pid}/environ`, 'utf8')).not.toContain(HOST_CREDENTIAL);
    expect(host.process.stderr()).not.toContain(HOST_CREDENTIAL);
    expect(server.process.stderr()).not.toContain(HOST_CREDENTIAL);
    expect(server.process.stderr()).toContain('"msg"'); // debug logging was on: the check read real log lines
    for (const dir of [server.dataDir, host.dataDir]) {
      for (const file of filesUnder(dir)) {
        const bytes = unlessGone(() => readFileSync(file));
        if (bytes) expect(bytes.includes(HOST_CREDENTIAL), file).toBe(false);
      }
    }
  });
});
