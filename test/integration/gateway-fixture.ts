/**
 * Starts the gateway in this process over the REAL runtime (startBerth on a temporary data directory, native
 * provider) on a real listening socket (port 0), with a tokens file on disk, the log stream captured and fault
 * injection available (faulty-runtime-api.ts), for the gateway-*.spec.ts integration tests. Tests that need the
 * gateway's limits or internals live here; the end-to-end ones (test/e2e) drive a `berth serve` child instead.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { buildGateway, type Gateway } from '../../src/gateway/app.ts';
import { createTokenAuth, loadTokensFile } from '../../src/gateway/auth.ts';
import type { GatewayLimits } from '../../src/gateway/limits.ts';
import { listen, type Listener } from '../../src/gateway/listen.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { RolePolicy } from '../../src/runtime/role-policy.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import type { RootMapping } from '../../src/runtime/workspaces/workspace-roots.ts';
import { emitScript } from '../fixtures/emit-bytes.mjs';
import { withFaults, type FaultyRuntimeApi } from './faulty-runtime-api.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

export const tokens = {
  admin: 'admin-token-3f9c2a71b8e04d56',
  alice: 'alice-token-8d1e6b0c2f7a4e93',
  bob: 'bob-token-5a4c9e2d7b1f0368a',
};

export const alice: Caller = { scope: 'alice', role: 'member' };

/** A real command writing `bytes` to stdout (and bytes/8, or `stderrBytes`, to stderr) over `durationMs`. */
export const emit = (bytes: number, durationMs = 300, stderrBytes?: number): string[] => [
  process.execPath,
  emitScript,
  String(bytes),
  String(durationMs),
  ...(stderrBytes === undefined ? [] : [String(stderrBytes)]),
];

export interface RunningGateway {
  url: string;
  port: number;
  /** The runtime's data directory (managed workspaces live under `workspaces/<id>/root`). */
  dataDir: string;
  berth: Berth;
  /** The runtime API the gateway serves: the real one, with fault injection. */
  api: FaultyRuntimeApi;
  gateway: Gateway;
  listener: Listener;
  /** Every log line the gateway wrote. */
  logs: string[];
  headers(token?: string): Record<string, string>;
  /** Drops every connection and stops listening (the runtime goes on, as behind a restarted proxy). */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  /** How many cancellations the execution's stream records (a disconnect must cause none). */
  cancelRequests(id: string, caller?: Caller): Promise<number>;
  close(): Promise<void>;
}

/**
 * `dataDirMb`: the data directory is a tmpfs of that size (a small filesystem a test can fill; needs root), searchable
 * by the sandbox identity so that members' contained commands run.
 */
export async function startGateway(options: { limits?: Partial<GatewayLimits>; workspaceRoots?: RootMapping[]; policy?: RolePolicy; dataDirMb?: number } = {}): Promise<RunningGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-gateway-'));
  const dataDir = join(dir, 'data');
  if (options.dataDirMb !== undefined) {
    // Searchable by the sandbox identity, as a data directory whose members' commands run contained must be.
    chmodSync(dir, 0o711);
    mkdirSync(dataDir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${options.dataDirMb}m,mode=0711`, 'tmpfs', dataDir]);
  }
  const tokensFile = join(dir, 'tokens.json');
  writeFileSync(
    tokensFile,
    JSON.stringify([
      { token: tokens.alice, scope: 'alice', role: 'member' },
      { token: tokens.bob, scope: 'bob', role: 'member' },
    ]),
    { mode: 0o600 },
  );
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const berth = await startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_gateway_test',
    providers: [new NativeProvider({ dataDir })],
    workspaceRoots: options.workspaceRoots ?? [],
    ...(options.policy ? { policy: options.policy } : {}),
  });
  const api = withFaults(berth.api);
  const auth = createTokenAuth({ adminToken: tokens.admin, tokens: await loadTokensFile(tokensFile) });
  // No pace per token unless a test sets one: the attack specs here send thousands of requests as one member on
  // purpose (a link swapped under a file route while it is read), and the pace has its own spec.
  const limits = { requestsPerSecond: 0, ...options.limits };
  const gateway = buildGateway({ api, auth, logger: pino({ level: 'debug' }, sink), limits });
  let listener = await listen(gateway, { port: 0 });
  const port = Number(new URL(listener.url).port);
  const running: RunningGateway = {
    url: listener.url,
    port,
    dataDir,
    berth,
    api,
    gateway,
    listener,
    logs,
    headers: (token = tokens.alice) => ({ authorization: `Bearer ${token}` }),
    stop: () => listener.close(),
    async restart() {
      listener = await listen(gateway, { port });
      running.listener = listener;
    },
    async cancelRequests(id, caller = alice) {
      const steps = await gathered(await berth.api.replay(caller, `execution-${id}`));
      return steps.filter((s) => s.event.type.startsWith('execution.cancel')).length;
    },
    async close() {
      await listener.close().catch(() => undefined);
      await gateway.close();
      await berth.stop();
      if (options.dataDirMb !== undefined) execFileSync('umount', [dataDir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return running;
}

/** Creates an environment in the caller's scope and returns its id. */
export async function createEnvironment(gw: RunningGateway, token = tokens.alice, name = `env ${Math.random()}`): Promise<string> {
  const response = await fetch(`${gw.url}/v1/environments`, {
    method: 'POST',
    headers: { ...gw.headers(token), 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (response.status !== 201) throw new Error(`create environment: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/** Submits an execution and returns its record. */
export async function submit(
  gw: RunningGateway,
  environment: string,
  command: string[],
  extra: Record<string, unknown> = {},
  token = tokens.alice,
): Promise<{ id: string; status: string; operationId: string }> {
  const response = await fetch(`${gw.url}/v1/executions`, {
    method: 'POST',
    headers: { ...gw.headers(token), 'content-type': 'application/json' },
    body: JSON.stringify({ operationId: `op-${Math.random()}`, environment, command, ...extra }),
  });
  if (response.status !== 201) throw new Error(`submit: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string; status: string; operationId: string };
}
