/**
 * An execution's allocation use. Nothing runs without it: a submission whose use the allocation refuses (it went
 * away meanwhile) fails stale_target and runs nothing.
 *
 * Execution uses nobody holds: an execution's use is taken alongside its acceptance (one group commit), so a crash
 * or a lost race can leave a use whose execution never landed, or one an ended execution never gave back.
 * Maintenance (`release-orphaned-uses`) gives those back, after a grace period for a use whose acceptance may still
 * be on its way, and never touches a use a live execution holds. Real runtime, SQLite file and native processes.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AllocationContext } from '../../src/machines/allocation.machine.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { executionIdOf, inputDigestOf } from '../../src/runtime/executions/execution-service.ts';
import { caller, environmentFor, run, settled, startTestBerth, tempDir } from './executions-harness.ts';

describe('release-orphaned-uses', () => {
  const dir = tempDir('berth-orphaned-uses-');
  let berth: Berth;
  let environment: string;
  let allocationId: string;

  const uses = async () =>
    Object.keys((await berth.runtime.actors.get<AllocationContext>('allocation', allocationId))!.context.uses).sort();
  const take = (useId: string, at: number) =>
    berth.runtime.actors.send('allocation', allocationId, { type: 'allocation.use_acquired', useId, kind: 'execution', at });

  beforeAll(async () => {
    berth = await startTestBerth(dir.path, false);
    environment = await environmentFor(berth.api, 'native');
    allocationId = (await berth.api.acquire(caller, environment)).allocationId;
  });
  afterAll(async () => {
    await berth?.stop();
    dir.remove();
  });

  it('gives back the use of an execution that never landed once the grace passed, and of one that ended, but not a live one', async () => {
    const now = Date.now();
    const neverLanded = executionIdOf(caller.scope, 'never-landed');
    const justTaken = executionIdOf(caller.scope, 'maybe-on-its-way');
    await take(neverLanded, now - 120_000);
    await take(justTaken, now);
    const ended = await run(berth.api, environment, ['true']);
    await berth.runtime.actors.whenIdle();
    expect(await uses()).not.toContain(ended.id);
    await take(ended.id, now); // as if the ended execution had not given it back
    const live = await berth.api.submitExecution(caller, { operationId: 'live', environment, command: ['sleep', '30'] });
    // (Not whenIdle: the live execution's watch is in flight until it ends.)
    while ((await berth.api.getExecution(caller, live.id, 1_000)).status !== 'running');
    expect(await uses()).toEqual([neverLanded, justTaken, ended.id, live.id].sort());

    await berth.runtime.maintenance.tick();
    expect(await uses()).toEqual([justTaken, live.id].sort());

    await berth.api.cancelExecution(caller, live.id);
    await berth.runtime.actors.whenIdle();
  });
});

describe('an execution whose use is refused', () => {
  const dir = tempDir('berth-use-refused-');
  let berth: Berth;
  afterAll(async () => {
    await berth?.stop();
    dir.remove();
  });

  it('fails stale_target and runs nothing when its allocation went away before the submit took the use', async () => {
    berth = await startTestBerth(dir.path, false);
    const environment = await environmentFor(berth.api, 'native');
    const allocation = await berth.api.acquire(caller, environment);
    await berth.api.release(caller, environment, allocation.allocationId);
    const marker = join(dir.path, 'ran');
    const input = { operationId: 'late', environment, command: ['/bin/sh', '-c', `touch ${marker}`] };
    const id = executionIdOf(caller.scope, input.operationId);
    const target = { environmentId: environment, allocationId: allocation.allocationId, generation: allocation.generation };
    // As the service appends it, but with the use it sends alongside refused (the allocation is released).
    const at = Date.now();
    await berth.runtime.actors.sendAll('execution', id, [
      { type: 'execution.accepted', operationId: input.operationId, inputDigest: inputDigestOf(environment, input), environmentId: environment, target, command: input.command, stdin: false, scope: caller.scope, at },
      { type: 'execution.dispatched', at },
    ]);
    const record = await settled(berth.api, id);
    expect(record).toMatchObject({ status: 'failed', failure: { code: 'stale_target' } });
    await berth.runtime.actors.whenIdle();
    expect(existsSync(marker)).toBe(false);
  });
});
