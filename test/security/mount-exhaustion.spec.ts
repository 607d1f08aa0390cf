/**
 * A tenant filling its Docker workspace view past the capture limits (issue 14): its command's checkpoint fails with
 * quota_exceeded and publishes nothing (the head and the directory are unchanged), and the view cannot hold its
 * allocation hostage: the release gives the unsaved view up (recorded) and removes the container and its volumes.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from '../integration/docker-env.ts';
import { testProviders } from '../integration/environments-berth.ts';

const run = newTestRun();
const admin: Caller = { scope: 'default', role: 'admin' };
const member: Caller = { scope: 'default', role: 'member' };
let dir: string;
let berth: Berth;

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-mount-limits-')));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'repo'));
  berth = await startBerth({
    settings: { dataDir: join(dir, 'data'), store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_mount_limits',
    providers: testProviders(join(dir, 'data'), { extraLabels: run }),
    workspaceRoots: [{ scope: 'default', storageId: 'repo', root: join(dir, 'repo') }],
    captureLimits: { maxEntries: 50, maxBytes: 1024 * 1024 },
  });
});
afterEach(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

describe.skipIf(!dockerAvailable)('a view filled past the capture limits', () => {
  it('publishes nothing, changes nothing, and does not keep its allocation from being released', async () => {
    const env = await berth.api.createEnvironment(admin, { name: 'filled', profile: { provider: 'docker', workspaceMb: 16 } });
    const ws = (await berth.api.listWorkspaces(member)).items[0]!;
    const session = await berth.api.createSession(member, { workspaceId: ws.id, environmentId: env.id });
    const turn = await berth.api.openTurn(member, session.id);
    const before = (await berth.runtime.actors.get<{ revision: number }>('workspace', ws.id))!.context.revision;
    const submitted = await berth.api.submitExecution(member, { operationId: 'fill', session: session.id, turn: turn.id, command: 'seq 1 200 | while read i; do : > f$i; done' });
    const x = await berth.api.getExecution(member, submitted.id, 60_000);
    expect(x).toMatchObject({ status: 'exited', exitCode: 0, checkpoint: { outcome: 'failed' } });
    expect((await berth.runtime.actors.get<{ revision: number }>('workspace', ws.id))!.context.revision).toBe(before);
    expect(existsSync(join(dir, 'repo', 'f1'))).toBe(false);
    const attempts = (await berth.runtime.store.readStream(`mount-${ws.id}`)).filter((e) => e.type === 'mount.checkpoint_failed');
    expect(attempts.map((e) => (e.data as { code: string }).code)).toEqual(['quota_exceeded']);
    // The server still answers the tenant (and everyone) meanwhile.
    expect((await berth.api.files.list(member, session.id, turn.id, '')).entries).toEqual([]);
    await berth.api.releaseTurn(member, session.id, turn.id);

    const released = await berth.api.release(admin, env.id, x.target.allocationId);
    await waitFor(async () => (await berth.api.environments.allocationView(x.target.allocationId)).state, { until: (s) => s === 'released', timeoutMs: 60_000, what: 'released' });
    expect(['releasing', 'released']).toContain(released.state);
    expect((await berth.runtime.actors.get('mount', ws.id))!.state).toBe('detached');
    const left = await rawDocker.listVolumes({ filters: { label: [`${LABEL.allocationId}=${x.target.allocationId}`] } });
    expect(left.Volumes ?? []).toHaveLength(0);
  });
});
