import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { currentTarget, environmentMachine, finished, reject } from '../../../src/machines/environment.machine.ts';
import { environmentActor, persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'a'.repeat(32)}`;
const spec = actorSpec(environmentActor, { actorId: ENV });
const dockerProfile = { provider: 'docker' as const, image: 'base:1', idleSeconds: 60 };

const created = { type: 'environment.created', name: 'Content Studio', slug: 'content-studio', scope: 'team-a', profile: dockerProfile, at: 1_000 };
const acquire = (n: number, at = 2_000 + n) => ({
  type: 'environment.acquisition_requested',
  allocationId: `alloc-${n}`,
  requestId: `req-${n}`,
  generation: n,
  at,
});
const allocated = (n: number) => ({ type: 'environment.allocated', allocationId: `alloc-${n}`, generation: n, at: 3_000 + n });
const failed = (n: number) => ({ type: 'environment.allocation_failed', allocationId: `alloc-${n}`, reason: 'image missing', at: 3_000 + n });
const lost = (n: number) => ({ type: 'environment.allocation_lost', allocationId: `alloc-${n}`, reason: 'container gone', at: 4_000 + n });
const releasing = (n: number) => ({ type: 'environment.allocation_releasing', allocationId: `alloc-${n}`, at: 5_000 + n });
const released = (n: number) => ({ type: 'environment.allocation_released', allocationId: `alloc-${n}`, at: 6_000 + n });
const recovered = { type: 'runtime.recovered', runtimeId: 'rt-1', epoch: 2, at: 9_000 };
const intend = (n: number, profile: object = dockerProfile, reflected?: string) => ({
  type: 'allocation.intend',
  params: { allocationId: `alloc-${n}`, requestId: `req-${n}`, environmentId: ENV, generation: n, profile, ...(reflected ? { reflected } : {}) },
});

describe('environment machine: catalog record', () => {
  it('should record a created environment without allocating anything', () => {
    spec.when(created).then(({ state, context, actions }) => {
      expect(state).toBe('idle');
      expect(actions).toEqual([]);
      expect(context).toMatchObject({ id: ENV, name: 'Content Studio', slug: 'content-studio', scope: 'team-a', generation: 0, acquisition: null });
    });
  });

  it('should default the reuse policy to session for docker and scope for native, unless the profile names one', () => {
    spec.when(created).then(({ context }) => expect(context.reuse).toBe('session'));
    spec.when({ ...created, profile: { provider: 'native' } }).then(({ context }) => expect(context.reuse).toBe('scope'));
    spec.when({ ...created, profile: { provider: 'docker', reuse: 'workspace' } }).then(({ context }) => expect(context.reuse).toBe('workspace'));
  });

  it('should refuse a second creation and any event before creation', () => {
    spec.given([created]).when(created).thenRejects('invalid_state');
    spec.when({ type: 'environment.updated', name: 'x', at: 1 }).thenRejects('environment_not_found');
    spec.when(acquire(1)).thenRejects('environment_not_found');
  });

  it('should apply an update field by field, clear with null, and recompute the reuse default', () => {
    spec
      .given([{ ...created, description: 'old', entry: 'run.sh' }])
      .when({ type: 'environment.updated', description: null, profile: { provider: 'native' }, at: 1_500 })
      .then(({ context, actions }) => {
        expect(actions).toEqual([]);
        expect(context).toMatchObject({ name: 'Content Studio', entry: 'run.sh', description: null, profile: { provider: 'native' }, reuse: 'scope' });
      });
  });

  it('should keep updatedAt strictly increasing when the clock does not move forward', () => {
    const update = (at: number) => ({ type: 'environment.updated', name: 'n', at });
    spec.given([created, update(1_000)]).when(update(900)).then(({ context }) => expect(context.updatedAt).toBe(1_002));
    spec.given([created]).when(update(5_000)).then(({ context }) => expect(context.updatedAt).toBe(5_000));
  });
});

describe('environment machine: coalesced acquisition', () => {
  it('should persist the acquisition and create the allocation actor with the intent', () => {
    spec.given([created]).when(acquire(1)).then({ state: 'acquiring', actions: [intend(1)] });
  });

  it('should refuse a second acquisition while one is under way, naming the one to wait for', () => {
    spec.given([created, acquire(1)]).when(acquire(2)).thenRejects('environment_busy');
    const r = reject(snapshotAfter(environmentActor, ENV, [created, acquire(1)]), acquire(2));
    expect(r).toMatchObject({ code: 'environment_busy', detail: { state: 'acquiring', allocationId: 'alloc-1', generation: 1 } });
  });

  it('should refuse acquisition while allocated or releasing', () => {
    spec.given([created, acquire(1), allocated(1)]).when(acquire(2)).thenRejects('environment_busy');
    spec.given([created, acquire(1), allocated(1), releasing(1)]).when(acquire(2)).thenRejects('environment_busy');
  });

  it('should require the next generation, so generations only grow', () => {
    spec.given([created]).when(acquire(2)).thenRejects('invalid_state');
    spec.given([created, acquire(1), failed(1)]).when(acquire(1)).thenRejects('invalid_state');
    spec.given([created, acquire(1), failed(1)]).when(acquire(2)).then({ state: 'acquiring', actions: [intend(2)] });
  });

  it('should expose the target only once the allocation is ready', () => {
    spec.given([created, acquire(1)]).when(allocated(1)).then({ state: 'allocated', actions: [] });
    expect(currentTarget(snapshotAfter(environmentActor, ENV, [created, acquire(1)]))).toBeNull();
    expect(currentTarget(snapshotAfter(environmentActor, ENV, [created, acquire(1), allocated(1)]))).toEqual({
      environmentId: ENV,
      allocationId: 'alloc-1',
      generation: 1,
    });
  });

  it('should refuse notifications about an allocation that is not the current one', () => {
    spec.given([created, acquire(1)]).when(allocated(7)).thenRejects('stale_target');
    spec.given([created, acquire(1), allocated(1), lost(1), acquire(2)]).when(released(1)).thenRejects('stale_target');
  });

  it('should return to idle when the provider confirmed nothing was allocated', () => {
    spec.given([created, acquire(1)]).when(failed(1)).then(({ state, context }) => {
      expect(state).toBe('idle');
      expect(context).toMatchObject({ acquisition: null, generation: 1 });
    });
  });

  it('should allow a new allocation with the next generation after a loss', () => {
    spec.given([created, acquire(1), allocated(1)]).when(lost(1)).then({ state: 'lost', actions: [] });
    spec.given([created, acquire(1), allocated(1), lost(1)]).when(acquire(2)).then({ state: 'acquiring', actions: [intend(2)] });
  });

  it('should go back to idle once the release is confirmed', () => {
    spec.given([created, acquire(1), allocated(1)]).when(releasing(1)).then({ state: 'releasing' });
    spec.given([created, acquire(1), allocated(1), releasing(1)]).when(released(1)).then(({ state, context }) => {
      expect(state).toBe('idle');
      expect(context.acquisition).toBeNull();
    });
    spec.given([created, acquire(1), allocated(1), releasing(1), released(1)]).when(acquire(2)).then({ state: 'acquiring' });
  });
});

describe('environment machine: deletion', () => {
  it('should refuse deletion while an allocation is acquiring, allocated or releasing', () => {
    const del = { type: 'environment.deleted', at: 7_000 };
    spec.given([created, acquire(1)]).when(del).thenRejects('environment_busy');
    spec.given([created, acquire(1), allocated(1)]).when(del).thenRejects('environment_busy');
    spec.given([created, acquire(1), allocated(1), releasing(1)]).when(del).thenRejects('environment_busy');
  });

  it('should delete an idle or lost environment and refuse everything after', () => {
    const del = { type: 'environment.deleted', at: 7_000 };
    spec.given([created]).when(del).then({ state: 'deleted', actions: [] });
    spec.given([created, acquire(1), lost(1)]).when(del).then({ state: 'deleted' });
    spec.given([created, del]).when(acquire(1)).thenRejects('environment_not_found');
    expect(finished(snapshotAfter(environmentActor, ENV, [created, del]))).toBe(true);
  });
});

describe('environment machine: recovery', () => {
  it('should re-send the original intent (same ids, same profile) while an allocation is named, saying what it already knows', () => {
    const update = { type: 'environment.updated', profile: { provider: 'native' }, at: 2_500 };
    spec.given([created, acquire(1), update]).when(recovered).then({ state: 'acquiring', actions: [intend(1)] });
    spec.given([created, acquire(1), allocated(1)]).when(recovered).then({ state: 'allocated', actions: [intend(1, dockerProfile, 'environment.allocated')] });
    spec.given([created, acquire(1), allocated(1), releasing(1)]).when(recovered).then({ actions: [intend(1, dockerProfile, 'environment.allocation_releasing')] });
  });

  it('should need no reconciliation when idle', () => {
    spec.given([created]).when(recovered).thenRejects('invalid_state');
    expect(finished(snapshotAfter(environmentActor, ENV, [created]))).toBe(true);
    expect(finished(snapshotAfter(environmentActor, ENV, [created, acquire(1)]))).toBe(false);
  });
});

describe('environment machine: snapshots', () => {
  it('should restore a persisted snapshot to the same state and context', () => {
    const s = snapshotAfter(environmentActor, ENV, [created, acquire(1), allocated(1)]);
    const r = persistedRoundTrip(environmentMachine, s);
    expect([r.value, r.context]).toStrictEqual([s.value, s.context]);
    expect(currentTarget(r)).toEqual(currentTarget(s));
  });
});
