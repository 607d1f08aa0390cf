/**
 * The kill -9 matrix of workspace mounts (issue 14): a real `berth serve` on a real Docker engine, a directory
 * workspace (BERTH_WORKSPACE_ROOTS), SIGKILLed by its own crash point (BERTH_CRASH_AT) at each persisted step of
 * preparing a view, saving it for an execution, and saving and detaching it for the allocation's release; restarted
 * on the same data directory. Every row: the mount converges (active at the same generation, or detached with a
 * published final checkpoint), no attempt is published twice, the command (which appends to runs.txt) ran once,
 * and after a release nothing labelled with the environment is left on the engine.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { replayStoredStream } from '../../src/runtime/core/stream-replay.ts';
import { executionIdOf } from '../../src/runtime/executions/execution-service.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { createEnvironment, finished, restartAfterCrash, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable } from '../integration/docker-env.ts';
import { countLabelled } from '../integration/environments-berth.ts';

const token = tokens.admin;
const RUN = 'echo run >> runs.txt';

interface Scene {
  server: BerthServer;
  /** The workspace's directory (the head every file tool reads). */
  root: string;
  /** The server's environment without the crash point. */
  env: Record<string, string>;
  environmentId: string;
  workspaceId: string;
  sessionId: string;
  turnId: string;
}

const scenes: { server: BerthServer; dir: string }[] = [];
afterEach(async () => {
  for (const { server, dir } of scenes.splice(0)) {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A server that kills itself at `crashAt`, a Docker environment, a session on the directory workspace, an open turn. */
async function scene(crashAt: string): Promise<Scene> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-mount-kill-')));
  chmodSync(dir, 0o755);
  const root = join(dir, 'repo');
  mkdirSync(root);
  writeFileSync(join(root, 'seed.txt'), 'from the host\n');
  const env = { BERTH_WORKSPACE_ROOTS: JSON.stringify([{ scope: 'default', storageId: 'repo', root }]) };
  const server = await startServer([], { ...env, BERTH_CRASH_AT: crashAt });
  scenes.push({ server, dir });
  const environmentId = await createEnvironment(server, token, { provider: 'docker', workspaceMb: 64 });
  const workspaces = await server.json<{ id: string; storageId: string }[]>('/v1/workspaces', { token });
  const workspaceId = workspaces.find((w) => w.storageId === 'repo')!.id;
  const session = await server.json<{ id: string }>('/v1/sessions', { body: { environmentId, workspaceId }, token });
  const turn = await server.json<{ id: string }>(`/v1/sessions/${session.id}/turns`, { body: {}, token });
  return { server, root, env, environmentId, workspaceId, sessionId: session.id, turnId: turn.id };
}

/** Submits `command` in the turn; the server may die under the request (then there is no answer). */
const submit = (s: Scene, operationId: string, command: string) =>
  s.server.call('/v1/executions', { body: { operationId, session: s.sessionId, turn: s.turnId, command }, token }).catch(() => undefined);

/**
 * A stream as the data directory's store has it (read beside the server: the replay route does not answer for mount
 * streams, see the report of issue 14), with the mount actor's state after its last event.
 */
interface Stored {
  type: string;
  data: Record<string, any>;
  /** Global: comparable across streams. */
  position: bigint;
}

async function stream(s: Scene, name: string): Promise<{ state: string; events: Stored[] }> {
  const store = SqliteEventStore.open(join(s.server.dataDir, 'events.sqlite3'));
  try {
    const { steps } = await replayStoredStream(store, name);
    return { state: String(steps.at(-1)?.stateAfter), events: steps.map(({ event }) => ({ type: event.type, data: event.data as Record<string, any>, position: event.position })) };
  } finally {
    await store.close();
  }
}

/** The mount: its state, its generation, and each checkpoint attempt's reason and outcomes (in order). */
async function mount(s: Scene) {
  const { state, events } = await stream(s, `mount-${s.workspaceId}`);
  const attempts: Record<string, { reason: string; outcomes: string[] }> = {};
  let generation = 0;
  for (const e of events) {
    if (e.type === 'mount.prepare_requested') generation = e.data.mountGeneration;
    if (e.type === 'mount.checkpoint_started') attempts[e.data.attemptId] = { reason: e.data.reason, outcomes: [] };
    if (['mount.checkpoint_published', 'mount.checkpoint_stale', 'mount.checkpoint_failed'].includes(e.type)) {
      attempts[e.data.attemptId]!.outcomes.push(e.type.replace('mount.checkpoint_', ''));
    }
  }
  const recovered = events.findIndex((e) => e.type === 'runtime.recovered');
  return {
    state,
    generation,
    attempts,
    events: events.map((e) => e.type),
    /** The last event the killed server recorded, and where the restarted one took over (global position). */
    killedAfter: events[recovered - 1]?.type,
    recoveredAt: events[recovered]?.position,
  };
}

/** Where an event of another stream was appended: by the killed server (before the mount's recovery) or after. */
async function sideOfKill(s: Scene, name: string, matches: (e: Stored) => boolean): Promise<'before' | 'after' | 'never'> {
  const { recoveredAt } = await mount(s);
  const found = (await stream(s, name)).events.find(matches);
  if (!found) return 'never';
  return recoveredAt !== undefined && found.position < recoveredAt ? 'before' : 'after';
}

/** The attempt ids published on the workspace, each as often as it was. */
const publishedAttempts = async (s: Scene) =>
  (await stream(s, `workspace-${s.workspaceId}`)).events.filter((e) => e.type === 'workspace.checkpoint_published').map((e) => String(e.data.attemptId));

const runs = (s: Scene) => (existsSync(join(s.root, 'runs.txt')) ? readFileSync(join(s.root, 'runs.txt'), 'utf8').split('\n').filter(Boolean).length : 0);

/** The execution, once its checkpoint has an outcome (it is recorded between exit and drain). */
const saved = (s: Scene, id: string) =>
  waitFor(() => s.server.json<Record<string, any>>(`/v1/executions/${id}?waitMs=5000`, { token }), {
    what: `execution ${id} saved`,
    until: (x) => ['cancelled', 'failed', 'unknown'].includes(x.status) || (x.status === 'exited' && x.checkpoint?.outcome !== undefined),
    timeoutMs: 90_000,
  });

/** One allocation's parts on the engine (its container, network, spool and staging volumes): no second view was made. */
const ONE_ALLOCATION = { containers: 1, networks: 1, volumes: 2 };

const expectNoTwicePublished = (attempts: string[]) => expect(attempts.length, `published: ${attempts.join(', ')}`).toBe(new Set(attempts).size);

describe.skipIf(!dockerAvailable)('kill -9 of berth serve while a workspace view is prepared, saved or detached (Docker)', () => {
  it.each(['mount.materializing', 'mount.materialized'])(
    'preparing, killed at %s: the view becomes active at generation 1 and the command runs once',
    async (crashAt) => {
      const s = await scene(crashAt);
      const operationId = `prepare-${crashAt}`;
      const id = executionIdOf('default', operationId);
      await submit(s, operationId, RUN);
      await restartAfterCrash(s.server, crashAt, s.env);

      // Recovery finishes the original materialization: same allocation, same generation.
      const recovered = await waitFor(() => mount(s), { what: 'the mount active', until: (m) => m.state === 'active', timeoutMs: 60_000 });
      expect(recovered.generation).toBe(1);
      // The kill landed where it was meant to: the preparation recorded, the allocation's use taken (or not yet).
      expect(recovered.killedAfter).toBe('mount.prepare_requested');
      const useTaken = (e: Stored) => e.type === 'allocation.use_acquired' && e.data.kind === 'mount';
      const allocationId = (await stream(s, `mount-${s.workspaceId}`)).events[0]!.data.target.allocationId;
      expect(await sideOfKill(s, `allocation-${allocationId}`, useTaken)).toBe(crashAt === 'mount.materializing' ? 'after' : 'before');
      // The view is pinned before the execution is accepted: the killed submission left no execution, nothing ran.
      expect((await s.server.call(`/v1/executions/${id}`, { token })).status).toBe(404);
      expect(runs(s)).toBe(0);

      // The client retries its submission (same operation id) twice: one execution, one run.
      for (let i = 0; i < 2; i++) {
        const retried = await s.server.json<{ id: string }>('/v1/executions', { body: { operationId, session: s.sessionId, turn: s.turnId, command: RUN }, token });
        expect(retried.id).toBe(id);
        expect(await saved(s, id)).toMatchObject({ status: 'exited', exitCode: 0, checkpoint: { outcome: 'published' } });
      }
      expect(runs(s)).toBe(1);
      expect((await mount(s)).generation).toBe(1);
      expectNoTwicePublished(await publishedAttempts(s));
      expect(await countLabelled(LABEL.environmentId, s.environmentId)).toEqual(ONE_ALLOCATION);
    },
    120_000,
  );

  it.each(['mount.capturing', 'mount.applied', 'mount.captured'])(
    "saving an execution's checkpoint, killed at %s: published once, the file in the directory, the command not re-run",
    async (crashAt) => {
      const s = await scene(crashAt);
      const operationId = `save-${crashAt}`;
      const id = executionIdOf('default', operationId);
      const command = `${RUN}; echo saved > saved.txt`;
      await submit(s, operationId, command);
      await restartAfterCrash(s.server, crashAt, s.env);

      const x = await saved(s, id);
      expect(x).toMatchObject({ status: 'exited', exitCode: 0, checkpoint: { outcome: 'published' } });
      expect(readFileSync(join(s.root, 'saved.txt'), 'utf8')).toBe('saved\n');
      expect(runs(s)).toBe(1);
      const published = await publishedAttempts(s);
      expect(published.filter((a) => a === id)).toHaveLength(1);
      expectNoTwicePublished(published);
      const m = await mount(s);
      expect(m).toMatchObject({ state: 'active', generation: 1 });
      expect(m.attempts[id]).toEqual({ reason: 'execution', outcomes: ['published'] });
      // Killed with the attempt recorded and its outcome not; published on the workspace by the killed server only
      // when the kill came after the publication (captured).
      expect(m.killedAfter).toBe('mount.checkpoint_started');
      const publishedIt = (e: Stored) => e.type === 'workspace.checkpoint_published' && e.data.attemptId === id;
      expect(await sideOfKill(s, `workspace-${s.workspaceId}`, publishedIt)).toBe(crashAt === 'mount.captured' ? 'before' : 'after');

      // A retried submission answers the same execution and does not run it again.
      const retried = await s.server.json<{ id: string }>('/v1/executions', { body: { operationId, session: s.sessionId, turn: s.turnId, command }, token });
      expect(retried.id).toBe(id);
      expect(runs(s)).toBe(1);
      expect(await countLabelled(LABEL.environmentId, s.environmentId)).toEqual(ONE_ALLOCATION);
    },
    120_000,
  );

  // The release's final capture is the second one of the scene (the execution's checkpoint is the first).
  it.each(['mount.capturing#2', 'mount.captured#2', 'mount.unused'])(
    "detaching for the allocation's release, killed at %s: detached with a published final checkpoint, released, nothing left",
    async (crashAt) => {
      const s = await scene(crashAt);
      const operationId = `detach-${crashAt}`;
      const id = executionIdOf('default', operationId);
      await submit(s, operationId, `${RUN}; echo final > final.txt`);
      const x = await saved(s, id);
      expect(x).toMatchObject({ status: 'exited', checkpoint: { outcome: 'published' } });
      await s.server.json(`/v1/sessions/${s.sessionId}/turns/${s.turnId}/release`, { body: {}, token });
      const allocation = `/v1/environments/${s.environmentId}/allocations/${x.target.allocationId}`;
      await s.server.call(allocation, { method: 'DELETE', token }).catch(() => undefined);
      await restartAfterCrash(s.server, crashAt, s.env);

      // The operator repeats the release (busy while the recovered one is still under way).
      const again = await s.server.call(allocation, { method: 'DELETE', token });
      expect([200, 409]).toContain(again.status);
      await waitFor(() => mount(s), { what: 'the mount detached', until: (m) => m.state === 'detached', timeoutMs: 60_000 });
      await waitFor(() => stream(s, `allocation-${x.target.allocationId}`), { what: 'the allocation released', until: (a) => a.state === 'released', timeoutMs: 60_000 });

      const m = await mount(s);
      const final = Object.entries(m.attempts).find(([, a]) => a.reason === 'detach' || a.reason === 'recapture');
      expect(final?.[1].outcomes, JSON.stringify(m.attempts)).toEqual(['published']);
      const published = await publishedAttempts(s);
      expectNoTwicePublished(published);
      expect(published).toContain(final![0]);
      expect(m.events.filter((t) => t === 'mount.detached')).toHaveLength(1);
      // Killed during the release's final save (its attempt recorded), or after it with the use given back.
      expect(m.killedAfter).toBe(crashAt === 'mount.unused' ? 'mount.checkpoint_published' : 'mount.checkpoint_started');
      const publishedFinal = (e: Stored) => e.type === 'workspace.checkpoint_published' && e.data.attemptId === final![0];
      expect(await sideOfKill(s, `workspace-${s.workspaceId}`, publishedFinal)).toBe(crashAt === 'mount.capturing#2' ? 'after' : 'before');
      const useBack = (e: Stored) => e.type === 'allocation.use_released' && e.data.useId === s.workspaceId;
      expect(await sideOfKill(s, `allocation-${x.target.allocationId}`, useBack)).toBe(crashAt === 'mount.unused' ? 'before' : 'after');
      expect(readFileSync(join(s.root, 'final.txt'), 'utf8')).toBe('final\n');
      expect(runs(s)).toBe(1);
      expect(await countLabelled(LABEL.environmentId, s.environmentId)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    },
    120_000,
  );
});
