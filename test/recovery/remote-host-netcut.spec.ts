/**
 * A network cut between the control plane and an Execution Host: the host runs in a network namespace of its own
 * (TLS on its veth address), the test takes the link down while a command runs and brings it up again. Meanwhile
 * the execution stays `running` (never exited by guess, never resubmitted: the command counts its starts); after
 * the heal it converges to its real exit with its whole output. Needs root (ip netns); skipped otherwise.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { cleanEnv, root as repo } from '../integration/cli-process.ts';
import { selfSigned } from '../fixtures/self-signed.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const isRoot = process.getuid?.() === 0;
const tag = process.pid % 10000;
const ns = `b16ns${tag}`;
const outside = `b16r${tag}`;
const inside = `b16n${tag}`;
const subnet = `10.216.${process.pid % 250}`;
const hostIp = `${subnet}.2`;
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

let dir: string;
let host: ReturnType<typeof spawn> | undefined;
let server: BerthServer;
let environment: string;
const admin = { token: tokens.admin };

beforeAll(async () => {
  if (!isRoot) return;
  dir = mkdtempSync(join(tmpdir(), 'berth-netcut-'));
  ip('netns', 'add', ns);
  ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', inside);
  ip('link', 'set', inside, 'netns', ns);
  ip('addr', 'add', `${subnet}.1/30`, 'dev', outside);
  ip('link', 'set', outside, 'up');
  ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${hostIp}/30`, 'dev', inside);
  ip('netns', 'exec', ns, 'ip', 'link', 'set', inside, 'up');
  ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');
  const credentialFile = join(dir, 'credential');
  writeFileSync(credentialFile, 'netcut-credential-8d1e4b7a2c9f\n', { mode: 0o600 });
  const tls = selfSigned(dir, hostIp);
  mkdirSync(join(dir, 'host'));
  host = spawn('ip', ['netns', 'exec', ns, process.execPath, join(repo, 'bin/berth.js'), 'host', '--listen', `${hostIp}:7431`, '--tls-cert', tls.certPath, '--tls-key', tls.keyPath, '--credential', credentialFile, '--data-dir', join(dir, 'host')], {
    cwd: repo,
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: host!.stdout! }).on('line', (line) => line.startsWith('Berth host listening') && resolve());
    host!.once('exit', (code) => reject(new Error(`berth host exited ${code}`)));
  });
  const hostsFile = join(dir, 'hosts.json');
  writeFileSync(hostsFile, JSON.stringify([{ name: 'host-ns', url: `https://${hostIp}:7431`, credentialFile, caFile: tls.certPath }]));
  server = await startServer([], { BERTH_REMOTE_HOSTS: hostsFile, BERTH_DOCKER: '0' });
  environment = await createEnvironment(server, tokens.admin, { provider: 'remote', host: 'host-ns' });
}, 180_000);

afterAll(async () => {
  if (!isRoot) return;
  await server?.close();
  host?.kill('SIGKILL');
  try {
    ip('link', 'del', outside);
  } catch {
    // Gone with the namespace already.
  }
  ip('netns', 'del', ns);
  rmSync(dir, { recursive: true, force: true });
});

/** Whether a TCP connection to the host's listener opens within a second. */
const reachable = () =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: hostIp, port: 7431, timeout: 1000 });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(false));
  });

const output = async (id: string) => (await server.call(`/v1/executions/${id}/output?stream=stdout`, admin)).text();

describe.skipIf(!isRoot)('a network cut between the control plane and a host', () => {
  it('keeps the execution running while the link is down and converges after the heal, started once', async () => {
    const starts = join(dir, 'starts');
    const gate = join(dir, 'gate');
    const script = `echo start >> ${starts}; echo first; while [ ! -e ${gate} ]; do sleep 0.05; done; seq 1 20000; exit 5`;
    const record = await submit(server, environment, ['/bin/sh', '-c', script], {}, tokens.admin);
    await running(server, record.id, tokens.admin);
    await waitFor(() => output(record.id), { what: 'the first line', until: (t) => t === 'first\n', timeoutMs: 20_000 });
    // The host's side goes down: the control plane's route stays on the veth and its packets are lost (taking this
    // side down instead would send them to the default route).
    ip('netns', 'exec', ns, 'ip', 'link', 'set', inside, 'down');
    writeFileSync(gate, ''); // the command finishes while the control plane cannot see its host
    await sleep(3000);
    expect(await reachable()).toBe(false); // the cut is real: nothing reaches the host now
    expect((await server.json(`/v1/executions/${record.id}`, admin)).status).toBe('running');
    ip('netns', 'exec', ns, 'ip', 'link', 'set', inside, 'up');
    await waitFor(reachable, { what: 'the healed link', timeoutMs: 10_000 });
    const done = await finished(server, record.id, tokens.admin);
    expect(done).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(await output(record.id)).toBe(`first\n${Array.from({ length: 20000 }, (_, i) => i + 1).join('\n')}\n`);
    expect(readFileSync(starts, 'utf8')).toBe('start\n');
  }, 150_000);
});
