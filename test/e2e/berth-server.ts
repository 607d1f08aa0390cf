/**
 * A real `berth serve` child process for the end-to-end tests: a temporary data directory, the admin token in
 * BERTH_TOKEN, a tokens file with two tenants (alice, bob), Docker through the test engine when there is one.
 * `restart` stops it (SIGTERM or SIGKILL) and starts it again on the same data directory and port, as an operator
 * would; `call` is fetch with a token; `cleanup` removes the Docker resources its environments made.
 */
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { AllocationLimits } from '../../src/providers/native/allocation-limits.ts';
import { cleanEnv, hasExited, spawnBerth, type Running } from '../integration/cli-process.ts';
import { dockerAvailable, dockerEndpoint, rawDocker } from '../integration/docker-env.ts';
import { stopLeftCommands } from '../fixtures/left-commands.ts';
import { waitFor } from '../fixtures/wait-for.ts';

export const tokens = {
  admin: 'e2e-admin-token-6b1f0c4d9a2e7358',
  alice: 'e2e-alice-token-1c8e5f2a7d9b0436',
  bob: 'e2e-bob-token-93a7d2c5e8f1b046a',
};

/** The environment a serve child gets: no BERTH_* of ours, the admin token, and the test Docker engine. */
export function serverEnv(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const docker: Record<string, string> =
    dockerAvailable && 'socketPath' in dockerEndpoint && dockerEndpoint.socketPath ? { DOCKER_HOST: `unix://${dockerEndpoint.socketPath}` } : {};
  return cleanEnv({
    BERTH_TOKEN: tokens.admin,
    BERTH_TOKENS_FILE: join(dataDir, '..', 'tokens.json'),
    BERTH_LOG_LEVEL: 'warn',
    ...(dockerAvailable ? docker : { BERTH_DOCKER: '0' }),
    ...extra,
  });
}

export interface BerthServer {
  url: string;
  dataDir: string;
  process: Running;
  call(path: string, init?: { method?: string; body?: unknown; token?: string | null; headers?: Record<string, string> }): Promise<Response>;
  /** JSON of a 2xx answer (throws with the body otherwise). */
  json<T = any>(path: string, init?: Parameters<BerthServer['call']>[1]): Promise<T>;
  /** `env` replaces the extra environment from this launch on (a crashed server comes back without its crash point). */
  restart(signal?: NodeJS.Signals, env?: Record<string, string>): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Kills the child, stops the native commands it left, removes Docker resources of its environments and the directory. */
  close(): Promise<void>;
}

/** `inherit`: descriptors the server process gets past stderr (see spawnBerth). */
export async function startServer(extraArgs: string[] = [], extraEnv: Record<string, string> = {}, inherit: (number | 'pipe' | 'ignore')[] = []): Promise<BerthServer> {
  const root = mkdtempSync(join(tmpdir(), 'berth-e2e-'));
  // Searchable by the sandbox identity (not listable), as an operator's data directory must be: contained commands
  // and builds of a root server bind their version from below it as that identity.
  chmodSync(root, 0o711);
  const dataDir = join(root, 'data');
  writeFileSync(
    join(root, 'tokens.json'),
    JSON.stringify([
      { token: tokens.alice, scope: 'alice', role: 'member' },
      { token: tokens.bob, scope: 'bob', role: 'member' },
    ]),
    { mode: 0o600 },
  );
  const environments = new Set<string>();
  let launchEnv = extraEnv;
  const launch = async (port: string) => {
    const child = spawnBerth(['serve', '--data-dir', dataDir, '--port', port, ...extraArgs], serverEnv(dataDir, launchEnv), inherit);
    const line = await child.waitForLine(/^Berth listening on http:\/\//, 60_000);
    return { child, url: line.replace('Berth listening on ', '') };
  };
  let { child, url } = await launch('0');
  const server: BerthServer = {
    url,
    dataDir,
    process: child,
    call(path, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      if (init.token !== null) headers.authorization = `Bearer ${init.token ?? tokens.alice}`;
      if (init.body !== undefined) headers['content-type'] ??= 'application/json';
      const body = init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      return fetch(`${server.url}${path}`, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
    },
    async json(path, init) {
      const response = await server.call(path, init);
      const text = await response.text();
      if (!response.ok) throw new Error(`${init?.method ?? 'GET'} ${path}: ${response.status} ${text}`);
      const value = text === '' ? undefined : JSON.parse(text);
      if (path === '/v1/environments' && init?.body !== undefined) environments.add(value.id);
      return value;
    },
    async restart(signal = 'SIGTERM', env) {
      await child.stop(signal);
      if (env) launchEnv = env;
      ({ child, url } = await launch(new URL(server.url).port));
      server.process = child;
    },
    stop: (signal) => child.stop(signal),
    async close() {
      // Environments made for leases and sandboxes (not through POST /v1/environments) are cleaned up too: the
      // admin lists every scope's, if the server still answers.
      const listed = await fetch(`${server.url}/v1/environments?limit=500`, { headers: { authorization: `Bearer ${tokens.admin}` }, signal: AbortSignal.timeout(2000) })
        .then((r) => (r.ok ? (r.json() as Promise<{ id: string }[]>) : []))
        .catch(() => []);
      for (const e of listed) environments.add(e.id);
      await child.stop('SIGKILL');
      await stopLeftCommands(dataDir);
      if (dockerAvailable) {
        for (const id of environments) {
          const filters = { label: [`${LABEL.environmentId}=${id}`] };
          for (const c of await rawDocker.listContainers({ all: true, filters })) await rawDocker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
          for (const n of await rawDocker.listNetworks({ filters })) await rawDocker.getNetwork(n.Id).remove().catch(() => undefined);
          for (const v of (await rawDocker.listVolumes({ filters })).Volumes ?? []) await rawDocker.getVolume(v.Name).remove().catch(() => undefined);
        }
      }
      // The killed server deallocated nothing: its empty control groups (native limits) go with its data directory.
      const limits = new AllocationLimits(dataDir);
      limits.sweep();
      limits.close();
      rmSync(root, { recursive: true, force: true, maxRetries: 5 });
    },
  };
  return server;
}

/** Creates an environment (native unless a profile says otherwise) in the token's scope; returns its id. */
export async function createEnvironment(server: BerthServer, token = tokens.alice, profile: Record<string, unknown> = {}): Promise<string> {
  const name = `e2e ${Math.random().toString(36).slice(2, 10)}`;
  return (await server.json<{ id: string }>('/v1/environments', { body: { name, profile }, token })).id;
}

let operations = 0;
/** Submits a command; returns the execution record. */
export async function submit(
  server: BerthServer,
  environment: string,
  command: string[] | string,
  extra: Record<string, unknown> = {},
  token = tokens.alice,
): Promise<{ id: string; status: string; operationId: string; [k: string]: unknown }> {
  const operationId = `e2e-${process.pid}-${Date.now()}-${++operations}`;
  return server.json('/v1/executions', { body: { operationId, environment, command, ...extra }, token });
}

/** Polls until the record says running (the executor holds the process). */
export function running(server: BerthServer, id: string, token = tokens.alice): Promise<Record<string, any>> {
  return waitFor(() => server.json<Record<string, any>>(`/v1/executions/${id}`, { token }), {
    until: (record) => record.status !== 'accepted',
    timeoutMs: 30_000,
    what: `execution ${id} to start`,
  });
}

/** Long-polls until the record is terminal. */
export async function finished(server: BerthServer, id: string, token = tokens.alice): Promise<Record<string, any>> {
  for (;;) {
    const record = await server.json(`/v1/executions/${id}?waitMs=20000`, { token });
    if (['exited', 'cancelled', 'failed', 'unknown'].includes(record.status)) return record;
  }
}

/**
 * Waits for a server started with BERTH_CRASH_AT to kill itself there (SIGKILL, else the test fails with its stderr),
 * then starts it again on the same data directory with `env` (the crash point left out).
 */
export async function restartAfterCrash(server: BerthServer, crashAt: string, env: Record<string, string>): Promise<void> {
  const { child } = server.process;
  const exited = hasExited(child) ? Promise.resolve() : once(child, 'exit');
  await Promise.race([exited, new Promise((_, reject) => setTimeout(() => reject(new Error(`the server did not die at ${crashAt}`)), 60_000))]);
  if (child.signalCode !== 'SIGKILL') {
    throw new Error(`the server should have killed itself at ${crashAt} (it ended with ${child.signalCode ?? child.exitCode}); stderr:\n${server.process.stderr().slice(-2000)}`);
  }
  await server.restart('SIGKILL', env);
}

