/**
 * Deleting an Environment (seed 001 §DELETE) with native and Docker allocations: an idle allocation is released as
 * part of the delete (physically removed and confirmed, as a release is) and the environment is gone after; a held
 * use refuses it with environment_busy and leaves everything as it was; the use of a command already reported
 * finished is waited out (it is given back once the command's output is saved), never refused.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../schemas/errors.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';
import { admin, countLabelled, startTestBerth } from './environments-berth.ts';

const run = newTestRun();
let dir: string;
let berth: Berth;

const codeOf = (call: () => Promise<unknown>): Promise<ErrorCode | undefined> =>
  call().then(
    () => undefined,
    (e: { code?: ErrorCode }) => e.code,
  );

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-env-delete-'));
  berth = await startTestBerth(dir, { docker: dockerAvailable ? { extraLabels: run } : false });
});
afterEach(async () => {
  await berth.stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => (dockerAvailable ? removeTestResources(run) : undefined));

const cases = [
  { provider: 'native' as const, skip: false },
  { provider: 'docker' as const, skip: !dockerAvailable },
];

describe('deleting an environment', () => {
  for (const { provider, skip } of cases) {
    it.skipIf(skip)(`should release its idle ${provider} allocation as part of the delete, then be gone`, async () => {
      const env = await berth.api.createEnvironment(admin, { name: `idle ${provider}`, profile: { provider } });
      const a = await berth.api.acquire(admin, env.id);
      expect(a.state).toBe('ready');
      if (provider === 'docker') expect((await countLabelled(LABEL.allocationId, a.allocationId)).containers).toBe(1);

      await berth.api.deleteEnvironment(admin, env.id);
      expect(await codeOf(() => berth.api.getEnvironment(admin, env.id))).toBe('environment_not_found');
      expect((await berth.api.environments.allocationView(a.allocationId)).state).toBe('released');
      expect(await berth.api.activeAllocations(admin)).toEqual({ items: [] });
      if (provider === 'docker') expect(await countLabelled(LABEL.allocationId, a.allocationId)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    });

    it.skipIf(skip)(`should refuse while a use holds its ${provider} allocation (environment_busy), and delete once it is given back`, async () => {
      const env = await berth.api.createEnvironment(admin, { name: `held ${provider}`, profile: { provider } });
      const a = await berth.api.acquire(admin, env.id);
      await berth.api.environments.acquireUse(admin, env.id, a.allocationId, 'physical', 'huse_delete_spec');

      expect(await codeOf(() => berth.api.deleteEnvironment(admin, env.id))).toBe('environment_busy');
      expect((await berth.api.getEnvironment(admin, env.id)).state).toBe('allocated');
      expect((await berth.api.environments.allocationView(a.allocationId)).state).toBe('ready');

      await berth.api.environments.releaseUse(admin, env.id, a.allocationId, 'huse_delete_spec');
      await berth.api.deleteEnvironment(admin, env.id);
      expect(await codeOf(() => berth.api.getEnvironment(admin, env.id))).toBe('environment_not_found');
      expect((await berth.api.environments.allocationView(a.allocationId)).state).toBe('released');
    });

    it.skipIf(skip)(`should release and delete its ${provider} allocation right after a command is reported finished`, async () => {
      // 32 MiB of output: its save keeps the finished command's use held for a while after its status says exited.
      const finishedCommand = async (environment: string) => {
        const { id } = await berth.api.submitExecution(admin, { operationId: `finished-${environment}`, environment, command: ['head', '-c', String(32 << 20), '/dev/zero'] });
        expect(await berth.api.getExecution(admin, id, 30_000)).toMatchObject({ status: 'exited', exitCode: 0 });
        return (await berth.api.listAllocations(admin, environment)).items[0]!;
      };
      const released = await berth.api.createEnvironment(admin, { name: `released ${provider}`, profile: { provider } });
      const a = await finishedCommand(released.id);
      expect(a.uses).toHaveLength(1);
      expect((await berth.api.release(admin, released.id, a.allocationId)).state).toBe('released');

      const deleted = await berth.api.createEnvironment(admin, { name: `deleted ${provider}`, profile: { provider } });
      const b = await finishedCommand(deleted.id);
      expect(b.uses).toHaveLength(1);
      await berth.api.deleteEnvironment(admin, deleted.id);
      expect(await codeOf(() => berth.api.getEnvironment(admin, deleted.id))).toBe('environment_not_found');
      expect((await berth.api.environments.allocationView(b.allocationId)).state).toBe('released');
    }, 60_000);
  }

  it('should delete an environment that was never allocated', async () => {
    const env = await berth.api.createEnvironment(admin, { name: 'never allocated', profile: { provider: 'native' } });
    await berth.api.deleteEnvironment(admin, env.id);
    expect(await codeOf(() => berth.api.getEnvironment(admin, env.id))).toBe('environment_not_found');
  });
});
