import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { allocationMachine, finished, reclaimableAt, reject } from '../../../src/machines/allocation.machine.ts';
import { viewOf } from '../../../src/machines/machine-view.ts';
import { allocationActor, persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'b'.repeat(32)}`;
const ID = 'alloc-1';
const spec = actorSpec(allocationActor, { actorId: ID });
const profile = { provider: 'docker' as const, image: 'base:1', idleSeconds: 60 };
const identity = { provider: 'docker' as const, resourceId: 'c0ffee', incarnation: 'c0ffee@2025-01-01T00:00:00Z' };

const intended = { type: 'allocation.intended', environmentId: ENV, requestId: 'req-1', generation: 3, profile, at: 1_000 };
const nativeIntended = { ...intended, profile: { provider: 'native' as const } };
const reported = (report: object, at = 2_000) => ({ type: 'allocation.reported', report, at });
const ready = reported({ status: 'ready', identity });
const pending = reported({ status: 'pending', reason: 'created, not started' });
const absent = (at = 2_000) => reported({ status: 'absent', reason: 'no such image' }, at);
const unknownReport = reported({ status: 'unknown', reason: 'daemon timeout' });
const fencedReport = reported({ status: 'fenced', identity: { ...identity, incarnation: 'other' }, reason: 'restarted' }, 5_000);
const use = (useId: string, kind = 'execution', extra: object = {}, at = 3_000) => ({ type: 'allocation.use_acquired', useId, kind, at, ...extra });
const unuse = (useId: string, at = 4_000) => ({ type: 'allocation.use_released', useId, at });
const release = (reason: 'explicit' | 'idle', at = 10_000) => ({ type: 'allocation.release_requested', reason, at });
const deallocated = (result: 'terminated' | 'unknown', at = 11_000) => ({ type: 'allocation.deallocated', result, at });
const recovered = (epoch = 2, runtimeId = 'rt-1') => ({ type: 'runtime.recovered', runtimeId, epoch, at: 20_000 });
const reconcile = { type: 'allocation.reconcile_requested', at: 15_000 };

const callParams = { allocationId: ID, requestId: 'req-1', environmentId: ENV, generation: 3, profile };
const withIdentity = { ...callParams, identity };
const notify = (event: object) => ({ type: 'environment.notify', params: { environmentId: ENV, event } });

describe('allocation machine: intent and provider reports', () => {
  it('should persist the intent, then call the provider with it', () => {
    spec.when(intended).then(({ state, context, actions }) => {
      expect(state).toBe('requested');
      expect(actions).toEqual([{ type: 'provider.allocate', params: callParams }]);
      expect(context).toMatchObject({ ownership: 'managed', call: 'allocate', uses: {} });
    });
    spec.when(nativeIntended).then(({ context }) => expect(context.ownership).toBe('borrowed'));
  });

  it('should refuse a second intent and tell the sender what the environment may have missed', () => {
    spec.given([intended]).when(intended).thenRejects('invalid_state');
    const whileRequested = reject(snapshotAfter(allocationActor, ID, [intended]), { ...intended, at: 9_000 });
    expect(whileRequested.detail).toMatchObject({ reason: 'already_intended', requestId: 'req-1' });
    expect(whileRequested.detail).not.toHaveProperty('environmentEvent');
    const whileReady = reject(snapshotAfter(allocationActor, ID, [intended, ready]), { ...intended, at: 9_000 });
    expect(whileReady.detail?.environmentEvent).toEqual({ type: 'environment.allocated', allocationId: ID, generation: 3, at: 9_000 });
    const afterFailure = reject(snapshotAfter(allocationActor, ID, [intended, absent()]), { ...intended, at: 9_000 });
    expect(afterFailure.detail?.environmentEvent).toEqual({
      type: 'environment.allocation_failed',
      allocationId: ID,
      reason: 'no such image',
      at: 9_000,
    });
  });

  it('should become ready and notify the environment with its generation', () => {
    spec.given([intended]).when(ready).then(({ state, context, actions }) => {
      expect(state).toBe('ready');
      expect(context).toMatchObject({ identity, call: null });
      expect(actions).toEqual([notify({ type: 'environment.allocated', allocationId: ID, generation: 3, at: 2_000 })]);
    });
  });

  it('should fail only on confirmed absence, and say so to the environment', () => {
    spec.given([intended]).when(absent()).then({
      state: 'failed',
      actions: [notify({ type: 'environment.allocation_failed', allocationId: ID, reason: 'no such image', at: 2_000 })],
    });
    expect(finished(snapshotAfter(allocationActor, ID, [intended, absent()]))).toBe(true);
  });

  it('should inspect an unknown allocation by its original request id, never allocate it again', () => {
    spec.given([intended]).when(unknownReport).then({ state: 'unknown', actions: [] });
    spec.given([intended, unknownReport]).when(recovered()).then({ state: 'unknown', actions: [{ type: 'provider.inspect', params: callParams }] });
    spec.given([intended, unknownReport]).when(reconcile).then({ actions: [{ type: 'provider.inspect', params: callParams }] });
    spec.given([intended, unknownReport]).when({ type: 'allocation.resume_requested', at: 3_000 }).thenRejects('invalid_state');
    // The inspection confirms absence: only then is the attempt over.
    spec.given([intended, unknownReport, reconcile]).when(absent(16_000)).then({ state: 'failed' });
    spec.given([intended, unknownReport, reconcile]).when(ready).then({ state: 'ready' });
  });

  it('should refuse a report when no provider call is in flight', () => {
    spec.given([intended, unknownReport]).when(ready).thenRejects('invalid_state');
    spec.given([intended, ready]).when(ready).thenRejects('invalid_state');
  });

  it('should resume a verified partial allocation under its original intent', () => {
    spec.given([intended]).when(pending).then({ state: 'pending', actions: [] });
    spec
      .given([intended, pending])
      .when({ type: 'allocation.resume_requested', at: 3_000 })
      .then({ state: 'requested', actions: [{ type: 'provider.allocate', params: callParams }] });
  });

  it('should refuse overlapping provider operations with environment_busy', () => {
    spec.given([intended]).when(release('explicit')).thenRejects('environment_busy');
    spec.given([intended]).when(reconcile).thenRejects('environment_busy');
    spec.given([intended, pending, reconcile]).when({ type: 'allocation.resume_requested', at: 16_000 }).thenRejects('environment_busy');
    spec.given([intended, ready, reconcile]).when(release('explicit')).thenRejects('environment_busy');
    spec.given([intended, ready, release('explicit')]).when(release('explicit')).thenRejects('environment_busy');
  });
});

describe('allocation machine: uses', () => {
  it('should record a use once per useId', () => {
    spec.given([intended, ready]).when(use('exec-1')).then(({ context, actions }) => {
      expect(actions).toEqual([]);
      expect(context.uses).toEqual({ 'exec-1': { kind: 'execution', at: 3_000 } });
      expect(context.lastActivityAt).toBe(3_000);
    });
    spec.given([intended, ready, use('exec-1')]).when(use('exec-1', 'execution', {}, 3_500)).then(({ context }) => {
      expect(Object.keys(context.uses)).toEqual(['exec-1']);
      expect(context.uses['exec-1'].at).toBe(3_000);
    });
  });

  it('should refuse uses before the allocation is ready', () => {
    spec.given([intended]).when(use('exec-1')).thenRejects('invalid_state');
    spec.given([intended, pending]).when(use('exec-1')).thenRejects('invalid_state');
  });

  it('should require an admission use to name its runtime and epoch', () => {
    spec.given([intended, ready]).when(use('adm-1', 'admission')).thenRejects('invalid_request');
    spec.given([intended, ready]).when(use('adm-1', 'admission', { runtimeId: 'rt-1', epoch: 1 })).then(({ context }) => {
      expect(context.uses['adm-1']).toEqual({ kind: 'admission', runtimeId: 'rt-1', epoch: 1, at: 3_000 });
    });
  });

  it('should release a held use and refuse releasing one it does not hold', () => {
    spec.given([intended, ready, use('exec-1')]).when(unuse('exec-1')).then(({ context }) => expect(context.uses).toEqual({}));
    spec.given([intended, ready]).when(unuse('exec-1')).thenRejects('invalid_state');
  });
});

describe('allocation machine: release', () => {
  it('should refuse release while any use is held', () => {
    spec.given([intended, ready, use('exec-1')]).when(release('explicit')).thenRejects('environment_busy');
  });

  it('should close admission and deallocate with the original identity', () => {
    spec.given([intended, ready]).when(release('explicit')).then({
      state: 'releasing',
      actions: [
        { type: 'provider.deallocate', params: withIdentity },
        notify({ type: 'environment.allocation_releasing', allocationId: ID, at: 10_000 }),
      ],
    });
    spec.given([intended, ready, release('explicit')]).when(use('exec-1')).thenRejects('environment_busy');
  });

  it('should finish only when the provider confirms termination', () => {
    const releasing = [intended, ready, release('explicit')];
    spec.given(releasing).when(deallocated('terminated')).then({
      state: 'released',
      actions: [notify({ type: 'environment.allocation_released', allocationId: ID, at: 11_000 })],
    });
    spec.given(releasing).when(deallocated('unknown')).then(({ state, context, actions }) => {
      expect(state).toBe('releasing');
      expect(context.call).toBeNull();
      expect(actions).toEqual([]);
    });
  });

  it('should retry deallocation from recovery and maintenance, since it is idempotent and confirms absence', () => {
    const stuck = [intended, ready, release('explicit'), deallocated('unknown')];
    spec.given(stuck).when(recovered()).then({ state: 'releasing', actions: [{ type: 'provider.deallocate', params: withIdentity }] });
    spec.given(stuck).when(reconcile).then({ actions: [{ type: 'provider.deallocate', params: withIdentity }] });
    spec.given([intended, ready, release('explicit')]).when(recovered()).then({ actions: [{ type: 'provider.deallocate', params: withIdentity }] });
  });

  it('should release a partial or unknown allocation explicitly', () => {
    spec.given([intended, pending]).when(release('explicit')).then({ state: 'releasing' });
    spec.given([intended, unknownReport]).when(release('explicit')).then({ state: 'releasing' });
  });
});

describe('allocation machine: idle reclamation', () => {
  it('should never reclaim a borrowed allocation for idleness', () => {
    spec.given([nativeIntended, ready]).when(release('idle', 1_000_000)).thenRejects('invalid_state');
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, [nativeIntended, ready])))).toBeNull();
    spec.given([nativeIntended, ready]).when(release('explicit')).then({ state: 'releasing' });
  });

  it('should reclaim a managed allocation only after its idle interval since the last activity', () => {
    const history = [intended, ready, use('exec-1', 'execution', {}, 3_000), unuse('exec-1', 4_000)];
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, history)))).toBe(64_000);
    spec.given(history).when(release('idle', 63_999)).thenRejects('invalid_state');
    spec.given(history).when(release('idle', 64_000)).then({ state: 'releasing' });
  });

  it('should release a partial or unknown allocation only explicitly, never for idleness', () => {
    spec.given([intended, pending]).when(release('idle', 1_000_000)).thenRejects('invalid_state');
    spec.given([intended, unknownReport]).when(release('idle', 1_000_000)).thenRejects('invalid_state');
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, [intended, pending])))).toBeNull();
  });

  it('should refuse releasing a finished allocation', () => {
    spec.given([intended, absent()]).when(release('explicit')).thenRejects('invalid_state');
    const r = reject(snapshotAfter(allocationActor, ID, [intended, absent()]), release('explicit'));
    expect(r.detail).toMatchObject({ reason: 'finished' });
  });

  it('should not offer reclamation while uses are held', () => {
    const history = [intended, ready, use('exec-1')];
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, history)))).toBeNull();
    spec.given(history).when(release('idle', 1_000_000)).thenRejects('environment_busy');
  });
});

describe('allocation machine: recovery and loss', () => {
  const uses = [
    use('adm-old', 'admission', { runtimeId: 'rt-1', epoch: 1 }),
    use('adm-now', 'admission', { runtimeId: 'rt-1', epoch: 2 }),
    use('adm-other', 'admission', { runtimeId: 'rt-2', epoch: 1 }),
    use('exec-1', 'execution'),
    use('phys-1', 'physical'),
    use('mount-1', 'mount'),
  ];

  it('should drop admission uses of an older epoch of the recovering runtime and inspect, nothing more', () => {
    spec.given([intended, ready, ...uses]).when(recovered(2)).then(({ context, actions }) => {
      expect(Object.keys(context.uses).sort()).toEqual(['adm-now', 'adm-other', 'exec-1', 'mount-1', 'phys-1']);
      expect(actions).toEqual([{ type: 'provider.inspect', params: withIdentity }]);
    });
  });

  it('should inspect, never allocate, when the runtime died during the allocate call', () => {
    spec.given([intended]).when(recovered()).then({ state: 'requested', actions: [{ type: 'provider.inspect', params: callParams }] });
  });

  it('should become lost when a ready allocation is found absent, keeping its uses', () => {
    spec.given([intended, ready, use('exec-1'), reconcile]).when(absent(16_000)).then(({ state, context, actions }) => {
      expect(state).toBe('lost');
      expect(Object.keys(context.uses)).toEqual(['exec-1']);
      expect(actions).toEqual([notify({ type: 'environment.allocation_lost', allocationId: ID, reason: 'no such image', at: 16_000 })]);
    });
  });

  it('should report a fenced incarnation instead of adopting it', () => {
    spec.given([intended, ready, reconcile]).when(fencedReport).then({
      state: 'fenced',
      actions: [notify({ type: 'environment.allocation_lost', allocationId: ID, reason: 'restarted', at: 5_000 })],
    });
  });

  it('should stay ready when an inspection cannot tell', () => {
    spec.given([intended, ready, reconcile]).when(unknownReport).then({ state: 'ready', actions: [] });
  });

  it('should let a lost allocation drain its uses, refuse new ones, then be released', () => {
    const lost = [intended, ready, use('exec-1'), reconcile, absent(16_000)];
    spec.given(lost).when(use('exec-2')).thenRejects('stale_target');
    spec.given(lost).when(release('explicit')).thenRejects('environment_busy');
    spec.given(lost).when(recovered()).then({ state: 'lost', actions: [] });
    spec.given([...lost, unuse('exec-1', 17_000)]).when(release('explicit', 18_000)).then({ state: 'releasing' });
  });
});

describe('allocation machine: snapshots', () => {
  it('should restore a persisted snapshot to the same state and context', () => {
    const s = snapshotAfter(allocationActor, ID, [intended, ready, use('adm-1', 'admission', { runtimeId: 'rt-1', epoch: 1 }), use('exec-1')]);
    const r = persistedRoundTrip(allocationMachine, s);
    expect([r.value, r.context]).toStrictEqual([s.value, s.context]);
  });
});

describe('allocation machine: release saves workspace views first', () => {
  const detachParams = { allocationId: ID, workspaceIds: ['hwsp_1'] };
  it('should close admission and ask its views to save and detach before deallocating', () => {
    spec.given([intended, ready, use('hwsp_1', 'mount')]).when(release('explicit')).then(({ state, context, actions }) => {
      expect(state).toBe('releasing');
      expect(context.call).toBeNull();
      expect(actions).toEqual([{ type: 'mounts.detach', params: detachParams }, notify({ type: 'environment.allocation_releasing', allocationId: ID, at: 10_000 })]);
    });
    spec.given([intended, ready, use('hwsp_1', 'mount'), release('explicit')]).when(use('x', 'execution', {}, 10_500)).thenRejects('environment_busy');
  });

  it('should deallocate once the last view gave its use back; recovery asks again while one is held', () => {
    const releasing = [intended, ready, use('hwsp_1', 'mount'), release('explicit')];
    spec.given(releasing).when(unuse('hwsp_1', 12_000)).then(({ context, actions }) => {
      expect(context.call).toBe('deallocate');
      expect(actions).toEqual([{ type: 'provider.deallocate', params: withIdentity }]);
    });
    spec.given(releasing).when(recovered()).then(({ actions }) => expect(actions).toEqual([{ type: 'mounts.detach', params: detachParams }]));
  });

  it('should still refuse a release while an execution uses it, and tell its views when it is lost', () => {
    spec.given([intended, ready, use('hwsp_1', 'mount'), use('exec-1')]).when(release('explicit')).thenRejects('environment_busy');
    spec.given([intended, ready, use('hwsp_1', 'mount'), reconcile]).when(absent(16_000)).then(({ state, actions }) => {
      expect(state).toBe('lost');
      expect(actions).toContainEqual({ type: 'mounts.lost', params: detachParams });
    });
  });
});

