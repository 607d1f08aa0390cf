/**
 * The kill -9 matrix of leases (issue 15): a real `berth serve` on a real Docker engine with a directory workspace,
 * SIGKILLed by its own crash point (BERTH_CRASH_AT) at each persisted step of a lease's first acquire, of the
 * reclaim of a paused lease's machine, and of the acquire that brings a new machine after a reclaim; restarted on the
 * same data directory. Every row: never two machines for the lease (one private environment, at most one container
 * labelled with it), the workspace head kept (a file written before is in the directory and read by a command after),
 * and the lease converges (running with a machine or paused without one) and a further acquire runs a command.
 * Binding and pausing have no HTTP route yet: they are done by the runtime in this process on the stopped server's
 * data directory; acquires go through `POST /v1/executions {lease}`.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import { replayStoredStream } from '../../src/runtime/core/stream-replay.ts';
import { leaseIdOf } from '../../src/runtime/leases/lease-service.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { restartAfterCrash, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, rawDocker } from '../integration/docker-env.ts';
import { countLabelled, testProviders } from '../integration/environments-berth.ts';

const token = tokens.admin;
const admin: Caller = { scope: 'default', role: 'admin' };
const KEY = 'wf-kill';
const LEASE = leaseIdOf('default', KEY);

interface Scene {
  server: BerthServer;
  root: string;
  /** The server's environment without a crash point (maintenance every 300 ms: reclaims come quickly). */
  env: Record<string, string>;
}

const scenes: { server: BerthServer; dir: string }[] = [];
afterEach(async () => {
  for (const { server, dir } of scenes.splice(0)) {
    // The lease's private environment was not made through the route the server fixture cleans up after.
    const { environments } = await machines({ server, root: '', env: {} }).catch(() => ({ environments: [] as string[] }));
    await server.close();
    for (const id of environments) await removeLabelled(id);
    rmSync(dir, { recursive: true, force: true });
  }
});

async function removeLabelled(environmentId: string): Promise<void> {
  const filters = { label: [`${LABEL.environmentId}=${environmentId}`] };
  for (const c of await rawDocker.listContainers({ all: true, filters })) await rawDocker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  for (const n of await rawDocker.listNetworks({ filters })) await rawDocker.getNetwork(n.Id).remove().catch(() => undefined);
  for (const v of (await rawDocker.listVolumes({ filters })).Volumes ?? []) await rawDocker.getVolume(v.Name).remove().catch(() => undefined);
}

/** The runtime in this process on the stopped server's data directory (its runtime id): `act`, then stopped again. */
async function offline(s: Scene, act: (berth: Berth) => Promise<unknown>): Promise<void> {
  await s.server.stop('SIGTERM');
  const dataDir = s.server.dataDir;
  const berth = await startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: readFileSync(join(dataDir, 'runtime-id'), 'utf8').trim(),
    providers: testProviders(dataDir),
    workspaceRoots: [{ scope: 'default', storageId: 'repo', root: s.root }],
  });
  try {
    await act(berth);
  } finally {
    await berth.stop();
  }
}

/** A server (no crash point yet) and the lease bound to the directory workspace, idle interval one second. */
async function scene(): Promise<Scene> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-lease-kill-')));
  chmodSync(dir, 0o755);
  const root = join(dir, 'repo');
  mkdirSync(root);
  writeFileSync(join(root, 'seed.txt'), 'from the host\n');
  const env = { BERTH_WORKSPACE_ROOTS: JSON.stringify([{ scope: 'default', storageId: 'repo', root }]), BERTH_MAINTENANCE_MS: '300' };
  const server = await startServer([], env);
  scenes.push({ server, dir });
  const s = { server, root, env };
  await offline(s, async (berth) => {
    const workspaceId = (await berth.api.listWorkspaces(admin)).items.find((w) => w.storageId === 'repo')!.id;
    await berth.api.leases.bind(admin, { key: KEY, work: { kind: 'step', id: 'kill' }, profile: { provider: 'docker', workspaceMb: 64 }, workspaceId, idleSeconds: 1 });
  });
  await server.restart('SIGTERM', env);
  return s;
}

/** The lease as its stream says (read beside the server): state, private environment, session, machine. */
async function lease(s: Scene) {
  const store = SqliteEventStore.open(join(s.server.dataDir, 'events.sqlite3'));
  try {
    const { steps } = await replayStoredStream(store, `lease-${LEASE}`);
    const view = { state: '', environmentId: null as string | null, sessionId: null as string | null, machine: null as { allocationId: string; generation: number } | null, events: [] as string[] };
    for (const { event, stateAfter } of steps) {
      const d = event.data as Record<string, any>;
      view.state = String(stateAfter);
      view.events.push(event.type);
      if (event.type === 'lease.environment_made') Object.assign(view, { environmentId: d.environmentId, sessionId: d.sessionId ?? null });
      if (event.type === 'lease.acquired') view.machine = { allocationId: d.allocationId, generation: d.generation };
      if (event.type === 'lease.reclaimed') view.machine = null;
    }
    return view;
  } finally {
    await store.close();
  }
}

let operations = 0;
/** A command on the lease's machine (acquired if need be), in a turn on its workspace when `turn` is given. */
const submitOnLease = (s: Scene, command: string, turn?: string) =>
  s.server.json<{ id: string }>('/v1/executions', { body: { operationId: `lease-kill-${process.pid}-${++operations}`, lease: KEY, command, ...(turn ? { turn } : {}) }, token });

/** A command naming the lease (no turn): the lease's machine is acquired (made if need be) and runs it. */
async function acquireByCommand(s: Scene): Promise<void> {
  const x = await submitOnLease(s, 'true');
  const done = await waitFor(() => s.server.json<Record<string, any>>(`/v1/executions/${x.id}?waitMs=5000`, { token }), {
    what: 'the command on the lease',
    until: (r) => r.status !== 'accepted' && r.status !== 'running',
    timeoutMs: 60_000,
  });
  expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
}

/** Runs `command` in a turn of the lease's session; answers once its checkpoint reached the directory. */
async function inTurn(s: Scene, command: string): Promise<void> {
  const { sessionId } = await lease(s);
  const turn = await s.server.json<{ id: string }>(`/v1/sessions/${sessionId}/turns`, { body: {}, token });
  const x = await submitOnLease(s, command, turn.id);
  const done = await waitFor(() => s.server.json<Record<string, any>>(`/v1/executions/${x.id}?waitMs=5000`, { token }), {
    what: `execution ${x.id} saved`,
    until: (r) => ['cancelled', 'failed', 'unknown'].includes(r.status) || (r.status === 'exited' && r.checkpoint?.outcome !== undefined),
    timeoutMs: 90_000,
  });
  expect(done).toMatchObject({ status: 'exited', exitCode: 0, checkpoint: { outcome: 'published' } });
  await s.server.json(`/v1/sessions/${sessionId}/turns/${turn.id}/release`, { body: {}, token });
}

/** The lease's private environments (by their derived name) and the containers labelled with each. */
async function machines(s: Scene): Promise<{ environments: string[]; containers: number[] }> {
  const listed = await s.server.json<{ items?: { id: string; name: string }[] } | { id: string; name: string }[]>('/v1/environments?limit=100', { token });
  const items = Array.isArray(listed) ? listed : (listed.items ?? []);
  const environments = items.filter((e) => e.name === `lease-${LEASE.slice(5, 17)}`).map((e) => e.id);
  return { environments, containers: await Promise.all(environments.map(async (id) => (await countLabelled(LABEL.environmentId, id)).containers)) };
}

/** After a row: one environment and at most one container; a command after the restart runs and reads the head's file. */
async function expectConverged(s: Scene, file: string, content: string): Promise<{ generation: number }> {
  const m = await machines(s);
  expect(m.environments).toHaveLength(1);
  expect(m.containers[0]).toBeLessThanOrEqual(1);
  expect(readFileSync(join(s.root, file), 'utf8')).toBe(content);
  const l = await lease(s);
  expect(['running', 'paused']).toContain(l.state);
  // A further acquire (a command naming the lease) runs; then one in a turn reads the file from the workspace.
  await acquireByCommand(s);
  await inTurn(s, `cat ${file} > read-after.txt`);
  expect(readFileSync(join(s.root, 'read-after.txt'), 'utf8')).toBe(content);
  const after = await lease(s);
  expect(await machines(s)).toEqual({ environments: [after.environmentId], containers: [1] });
  expect(after.state).toBe('running');
  expect(after.machine).not.toBeNull();
  return after.machine!;
}

/** Pauses the lease (offline) and waits for the restarted server's maintenance to reclaim its machine. */
async function pauseAndReclaim(s: Scene, env: Record<string, string>): Promise<void> {
  await offline(s, (berth) => berth.api.leases.pause(admin, KEY, { cause: { kind: 'model_unavailable' } }));
  await s.server.restart('SIGTERM', env);
}

const reclaimed = (s: Scene) => waitFor(() => lease(s), { what: 'the machine reclaimed', until: (l) => l.state === 'paused' && l.machine === null, timeoutMs: 60_000 });

describe.skipIf(!dockerAvailable)('kill -9 of berth serve while a lease acquires, reclaims and resumes (Docker)', () => {
  it.each(['lease.environment-created', 'allocation.provider-answered', 'docker.container-created', 'lease.allocation-acquired'])(
    'first acquire, killed at %s: one environment, one container, the head kept, the lease acquires',
    async (crashAt) => {
      const s = await scene();
      await s.server.restart('SIGTERM', { ...s.env, BERTH_CRASH_AT: crashAt });
      await submitOnLease(s, 'true').catch(() => undefined);
      await restartAfterCrash(s.server, crashAt, s.env);
      const before = await lease(s);
      expect(before.events).not.toContain('lease.acquired');
      expect(before.state).toBe('running');
      const machine = await expectConverged(s, 'seed.txt', 'from the host\n');
      expect(machine.generation).toBe(1);
    },
    180_000,
  );

  // Not mount.captured: a server restarted after the offline pause reaches it during its startup, before it listens.
  it.each(['mount.capturing', 'mount.unused', 'lease.machine-released'])(
    'reclaim of a paused lease, killed at %s: the machine goes once, the file written before comes back on the next',
    async (crashAt) => {
      const s = await scene();
      await acquireByCommand(s);
      await inTurn(s, 'echo before-pause > kept.txt');
      const first = (await lease(s)).machine!;
      await pauseAndReclaim(s, { ...s.env, BERTH_CRASH_AT: crashAt });
      await restartAfterCrash(s.server, crashAt, s.env);
      await reclaimed(s);
      const m = await machines(s);
      expect(m.containers).toEqual([0]);
      expect(readFileSync(join(s.root, 'kept.txt'), 'utf8')).toBe('before-pause\n');
      const machine = await expectConverged(s, 'kept.txt', 'before-pause\n');
      expect(machine.generation).toBe(first.generation + 1);
    },
    180_000,
  );

  it.each(['allocation.provider-answered', 'docker.container-created', 'lease.allocation-acquired'])(
    'acquire after a reclaim, killed at %s: one new machine at the next generation with the file',
    async (crashAt) => {
      const s = await scene();
      await acquireByCommand(s);
      await inTurn(s, 'echo before-pause > kept.txt');
      const first = (await lease(s)).machine!;
      await pauseAndReclaim(s, s.env);
      await reclaimed(s);
      await s.server.restart('SIGTERM', { ...s.env, BERTH_CRASH_AT: crashAt });
      await submitOnLease(s, 'true').catch(() => undefined);
      await restartAfterCrash(s.server, crashAt, s.env);
      const machine = await expectConverged(s, 'kept.txt', 'before-pause\n');
      expect(machine.generation).toBe(first.generation + 1);
      expect(existsSync(join(s.root, 'read-after.txt'))).toBe(true);
    },
    180_000,
  );
});
