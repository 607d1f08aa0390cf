/**
 * Leases on a real Docker engine through the runtime (issue 15): binding allocates nothing, acquires share one
 * machine, a pause past the idle interval reclaims the machine (its workspace view saved first) and a resume brings a
 * new one at the next generation with the work's files, a short pause keeps the machine.
 */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { countLabelled } from './environments-berth.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';
import { testProviders } from './environments-berth.ts';

const run = newTestRun();
const admin: Caller = { scope: 'default', role: 'admin' };
let dir: string;
let berth: Berth;
let clock = Date.now();

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-leases-')));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'repo'));
  clock = Date.now();
  berth = await startBerth({
    settings: { dataDir: join(dir, 'data'), store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_leases',
    providers: testProviders(join(dir, 'data'), { extraLabels: run }),
    workspaceRoots: [{ scope: 'default', storageId: 'repo', root: join(dir, 'repo') }],
    now: () => clock,
  });
});
afterEach(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

const containersOf = async (environmentId: string) => (await countLabelled(LABEL.environmentId, environmentId)).containers;

async function inTurn(lease: { sessionId: string | null }, key: string, command: string): Promise<string> {
  const turn = await berth.api.openTurn(admin, lease.sessionId!);
  try {
    const x = await berth.api.submitExecution(admin, { operationId: `op-${Math.random()}`, lease: key, turn: turn.id, command });
    const done = await berth.api.getExecution(admin, x.id, 60_000);
    expect(done.status).toBe('exited');
    return (await berth.api.readOutput(admin, x.id, 'stdout', 0)).data.toString();
  } finally {
    await berth.api.releaseTurn(admin, lease.sessionId!, turn.id);
  }
}

describe.skipIf(!dockerAvailable)('leases on Docker', () => {
  it('bind allocates nothing; twenty concurrent acquires make one container', async () => {
    const lease = await berth.api.leases.bind(admin, { key: 'wf-1', work: { kind: 'step', id: 's1' }, profile: { provider: 'docker' } });
    expect(lease).toMatchObject({ state: 'running', environmentId: null, machine: null });
    expect(await berth.api.leases.bind(admin, { key: 'wf-1', work: { kind: 'step', id: 's1' }, profile: { provider: 'docker' } })).toMatchObject({ id: lease.id });
    await expect(berth.api.leases.bind(admin, { key: 'wf-1', work: { kind: 'step', id: 'other' }, profile: { provider: 'docker' } })).rejects.toMatchObject({ code: 'operation_conflict' });
    const targets = await Promise.all(Array.from({ length: 20 }, () => berth.api.leases.acquire(admin, 'wf-1')));
    expect(new Set(targets.map((t) => t.target.allocationId)).size).toBe(1);
    expect(await containersOf(targets[0]!.target.environmentId)).toBe(1);
    const x = await berth.api.submitExecution(admin, { operationId: 'on-lease', lease: 'wf-1', command: 'echo hi' });
    expect((await berth.api.getExecution(admin, x.id, 60_000)).target.allocationId).toBe(targets[0]!.target.allocationId);
    await berth.api.leases.release(admin, 'wf-1');
    expect(await containersOf(targets[0]!.target.environmentId)).toBe(0);
  });

  it('a pause past the idle interval reclaims the machine; resume brings a new one with the files', async () => {
    const ws = (await berth.api.listWorkspaces(admin)).items[0]!;
    const bound = await berth.api.leases.bind(admin, { key: 'wf-2', work: { kind: 'step', id: 's2' }, profile: { provider: 'docker' }, workspaceId: ws.id, idleSeconds: 60 });
    const first = await berth.api.leases.acquire(admin, 'wf-2');
    const lease = first.lease;
    expect(lease.sessionId).not.toBeNull();
    await inTurn(lease, 'wf-2', 'echo before-pause > kept.txt');
    await berth.api.leases.pause(admin, 'wf-2', { cause: { kind: 'model_unavailable' } });
    clock += 61_000;
    // A tick reclaims an idle machine whose release is confirmed; one that finds it still busy (the turn's command
    // gives its allocation back moments after it ends) or still releasing leaves it to the next tick, as the timer's do.
    const paused = await waitFor(
      async () => {
        await berth.api.leases.tick(clock);
        return berth.api.leases.get(admin, 'wf-2');
      },
      { what: 'the paused lease reclaimed by a tick', timeoutMs: 60_000, intervalMs: 100, until: (l) => l.machine === null },
    );
    expect(paused).toMatchObject({ state: 'paused', machine: null });
    expect(await containersOf(first.target.environmentId)).toBe(0);
    expect((await countLabelled(LABEL.environmentId, first.target.environmentId)).volumes).toBe(0);
    const again = await berth.api.leases.acquire(admin, 'wf-2');
    expect(again.target.generation).toBe(first.target.generation + 1);
    expect(again.reused).toBe(false);
    expect(await inTurn(again.lease, 'wf-2', 'cat kept.txt')).toBe('before-pause\n');
    expect(bound.id).toBe(again.lease.id);
    await berth.api.leases.release(admin, 'wf-2');
  });

  it('a pause shorter than the idle interval keeps the machine', async () => {
    await berth.api.leases.bind(admin, { key: 'wf-3', work: { kind: 'step', id: 's3' }, profile: { provider: 'docker' }, idleSeconds: 60 });
    const first = await berth.api.leases.acquire(admin, 'wf-3');
    await berth.api.leases.pause(admin, 'wf-3', { cause: { kind: 'rate_limited' }, retryAt: clock + 10_000 });
    clock += 11_000;
    await berth.api.leases.tick(clock); // the timer resumes it
    expect((await berth.api.leases.get(admin, 'wf-3')).state).toBe('running');
    const again = await berth.api.leases.acquire(admin, 'wf-3');
    expect(again).toMatchObject({ reused: true, target: first.target });
    expect(await containersOf(first.target.environmentId)).toBe(1);
    await berth.api.leases.release(admin, 'wf-3');
  });
});
