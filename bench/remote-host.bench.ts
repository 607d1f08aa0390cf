/**
 * The remote Execution Host's cost (issue 16): submit -> receipt of `true` through a `berth host` child over its Unix
 * socket (p50 ≤ 1.5× local native) and over TLS on loopback (≤ 2×), and 256 MiB of output followed by cursor through
 * the host against the same read locally (≥ 0.5×). Local and remote rounds are interleaved so load hits both alike.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { allocationReportSchema } from '../schemas/events/allocation.ts';
import { commandEnv } from '../src/providers/command-env.ts';
import { NativeExecutor } from '../src/providers/native/native-executor.ts';
import type { Executor } from '../src/providers/provider.ts';
import { HostClient, type RemoteHostConfig } from '../src/providers/remote/host-client.ts';
import { RemoteExecutor } from '../src/providers/remote/remote-executor.ts';
import { selfSigned } from '../test/fixtures/self-signed.ts';
import { installedEnv } from './berth-serve.ts';
import { figure, median } from './figure.ts';

const ROUNDS = 10;
const PER_ROUND = 20;
const FOLLOW_BYTES = 256 * 1024 * 1024;
const READ_BYTES = 4 * 1024 * 1024;

const root = mkdtempSync(join(tmpdir(), 'berth-bench-remote-'));
const credentialFile = join(root, 'credential');
writeFileSync(credentialFile, 'bench-credential-0123456789abcdef\n', { mode: 0o600 });
const { certPath, keyPath } = selfSigned(root);

/** Starts a `berth host` child and answers the URL it prints. */
async function startHost(name: string, listen: string[]) {
  const child = spawn(process.execPath, ['bin/berth.js', 'host', '--data-dir', join(root, name), '--credential', credentialFile, ...listen], { env: installedEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^Berth host listening on (\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`berth host ${name} exited ${code}`)));
  });
  return { child, url };
}

/** An executor on a fresh allocation of the host. */
async function remoteExecutor(config: RemoteHostConfig): Promise<{ executor: Executor; client: HostClient }> {
  const client = new HostClient(config);
  const target = { environmentId: 'henv_bench', allocationId: `halloc_${config.name}`, requestId: `req_${config.name}`, generation: 1 };
  const report = await client.call('/v1/provider/allocate', { target, profile: { provider: 'remote', host: config.name } }, allocationReportSchema);
  if (report.status !== 'ready') throw new Error(`allocate on ${config.name}: ${report.status}`);
  return { executor: new RemoteExecutor(client, { ...target, incarnation: report.identity.incarnation }), client };
}

const env = commandEnv();
let n = 0;

/** As the runtime does: submit with settleMs, then watch until exited; the spool is released outside the time. */
async function run(ex: Executor, command: string[]): Promise<string> {
  const operationId = `bench-${++n}`;
  let receipt = await ex.submit({ operationId, command, env, stdin: false, settleMs: 15 });
  while (receipt.state !== 'exited') {
    await ex.waitForChange(operationId, 1000, {}); // the receipt: a wait for any change could begin after it
    receipt = await ex.status(operationId);
  }
  if (receipt.exitCode !== 0) throw new Error(`${command.join(' ')} exited ${receipt.exitCode}`);
  return operationId;
}

async function timeTrue(ex: Executor, samples: number[]): Promise<void> {
  for (let i = 0; i < PER_ROUND; i++) {
    const start = performance.now();
    const id = await run(ex, ['true']);
    samples.push(performance.now() - start);
    await ex.release(id);
  }
}

/** MiB/s of following a command writing FOLLOW_BYTES by cursor, from its submit to its last byte. */
async function follow(ex: Executor): Promise<number> {
  const operationId = `bench-${++n}`;
  const start = performance.now();
  await ex.submit({ operationId, command: ['head', '-c', String(FOLLOW_BYTES), '/dev/zero'], env, stdin: false });
  const buffer = Buffer.allocUnsafe(READ_BYTES);
  let cursor = 0;
  for (;;) {
    const chunk = await ex.read(operationId, 'stdout', cursor, READ_BYTES, buffer);
    cursor = chunk.next;
    if (chunk.closed && chunk.data.length === 0) break;
    if (chunk.data.length === 0) await ex.waitForChange(operationId, 1000, { stdout: cursor });
  }
  const seconds = (performance.now() - start) / 1000;
  if (cursor !== FOLLOW_BYTES) throw new Error(`followed ${cursor} of ${FOLLOW_BYTES} bytes`);
  await ex.release(operationId);
  return FOLLOW_BYTES / 1024 / 1024 / seconds;
}

const unixHost = await startHost('unix', ['--socket', join(root, 'host.sock')]);
const tlsHost = await startHost('tls', ['--listen', '127.0.0.1:0', '--tls-cert', certPath, '--tls-key', keyPath]);
try {
  const local = new NativeExecutor({ spoolDir: join(root, 'local-spool'), profile: { provider: 'native' } });
  const overUnix = await remoteExecutor({ name: 'unix', socketPath: join(root, 'host.sock'), credentialFile });
  const overTls = await remoteExecutor({ name: 'tls', url: tlsHost.url, credentialFile, caFile: certPath });

  const localTrue: number[] = [];
  const unixTrue: number[] = [];
  const tlsTrue: number[] = [];
  // Warm every path (module loading, first spawns, TLS sessions) before measuring.
  await timeTrue(local, []);
  await timeTrue(overUnix.executor, []);
  await timeTrue(overTls.executor, []);
  for (let round = 0; round < ROUNDS; round++) {
    await timeTrue(local, localTrue);
    await timeTrue(overUnix.executor, unixTrue);
    await timeTrue(overTls.executor, tlsTrue);
  }
  const localFollow: number[] = [];
  const remoteFollow: number[] = [];
  for (let round = 0; round < 3; round++) {
    localFollow.push(await follow(local));
    remoteFollow.push(await follow(overUnix.executor));
  }
  figure('remote-host.true.unix.p50', median(unixTrue), 'ms', median(localTrue), { op: '<=', ratio: 1.5 });
  figure('remote-host.true.tls.p50', median(tlsTrue), 'ms', median(localTrue), { op: '<=', ratio: 2 });
  figure('remote-host.follow-256MiB', median(remoteFollow), 'MiB/s', median(localFollow), { op: '>=', ratio: 0.5 });
  local.close();
  overUnix.client.close();
  overTls.client.close();
} finally {
  unixHost.child.kill('SIGTERM');
  tlsHost.child.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
}
