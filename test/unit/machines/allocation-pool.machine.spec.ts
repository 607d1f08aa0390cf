/**
 * A warm pool's allocation in the allocation machine (issue 20): while the pool owns it, it tells no environment and
 * is never reclaimed for idleness; `allocation.claimed` rebinds it once, ready and unused, to an environment and
 * records the content version it shows, telling that environment nothing itself (the claiming effect does, once the
 * version is shown); a claim sent again answers as a missed notification, with the version the claim recorded.
 */
import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { reclaimableAt, reject } from '../../../src/machines/allocation.machine.ts';
import { viewOf } from '../../../src/machines/machine-view.ts';
import { allocationActor, snapshotAfter } from './machine-actors.ts';

const POOL = 'hpool_warm';
const ENV = `henv_${'c'.repeat(32)}`;
const OTHER = `henv_${'d'.repeat(32)}`;
const ID = 'alloc-pooled';
const spec = actorSpec(allocationActor, { actorId: ID });
const poolProfile = { provider: 'docker' as const, memoryMb: 512 };
const envProfile = { provider: 'docker' as const, memoryMb: 256, idleSeconds: 30 };
const identity = { provider: 'docker' as const, resourceId: 'c0ffee', incarnation: 'c0ffee@2025-01-01T00:00:00Z' };

const intended = { type: 'allocation.intended', environmentId: POOL, requestId: 'req-p', generation: 1, profile: poolProfile, ownership: 'managed', at: 1_000 };
const ready = { type: 'allocation.reported', report: { status: 'ready', identity }, at: 2_000 };
const claimed = (environmentId = ENV, generation = 4, at = 5_000, contentVersion?: number) => ({
  type: 'allocation.claimed',
  environmentId,
  generation,
  profile: envProfile,
  ...(contentVersion ? { contentVersion } : {}),
  at,
});
const use = { type: 'allocation.use_acquired', useId: 'x-1', kind: 'execution', at: 3_000 };

describe('allocation machine: a warm pool\'s allocation', () => {
  it('should tell no environment while the pool owns it, and never be reclaimable for idleness', () => {
    spec.given([intended]).when(ready).then(({ state, actions }) => {
      expect(state).toBe('ready');
      expect(actions).toEqual([{ type: 'environment.notify', params: { environmentId: POOL, event: null } }]);
    });
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, [intended, ready])))).toBeNull();
  });

  it('should be rebound by a claim to the environment, its generation, profile and content version, telling nobody itself', () => {
    spec.given([intended, ready]).when(claimed(ENV, 4, 5_000, 3)).then(({ state, context, actions }) => {
      expect(state).toBe('ready');
      expect(context).toMatchObject({ environmentId: ENV, generation: 4, profile: envProfile, contentVersion: 3, lastActivityAt: 5_000 });
      // The environment's claiming effect says `allocated` once the version is shown (src/runtime/pools/pool-claim.ts).
      expect(actions).toEqual([]);
    });
    // Claimed, it is reclaimed after the environment's idle interval like any other.
    expect(reclaimableAt(viewOf(snapshotAfter(allocationActor, ID, [intended, ready, claimed()])))).toBe(5_000 + 30_000);
  });

  it('should accept one claim only: a claim sent again answers what the environment missed, another one is refused', () => {
    const after = snapshotAfter(allocationActor, ID, [intended, ready, claimed(ENV, 4, 5_000, 3)]);
    spec.given([intended, ready, claimed()]).when(claimed()).thenRejects('invalid_state');
    // The version recorded, not the one the claim sent again names (another may be active by then).
    expect(reject(after, claimed(ENV, 4, 9_000, 7)).detail).toMatchObject({
      reason: 'already_claimed',
      environmentEvent: { type: 'environment.allocated', allocationId: ID, generation: 4, at: 9_000 },
      contentVersion: 3,
    });
    expect(reject(after, claimed(OTHER, 1)).detail).toMatchObject({ reason: 'not_claimable' });
  });

  it('should accept a claim while recovery inspects it, the report then answering for the environment', () => {
    const recovered = { type: 'runtime.recovered', runtimeId: 'rt-1', epoch: 2, at: 4_000 };
    spec.given([intended, ready, recovered]).when(claimed()).then(({ context }) => expect(context).toMatchObject({ environmentId: ENV, call: 'inspect' }));
    const gone = { type: 'allocation.reported', report: { status: 'absent' }, at: 6_000 };
    spec.given([intended, ready, recovered, claimed()]).when(gone).then(({ state, actions }) => {
      expect(state).toBe('lost');
      expect(actions).toContainEqual({ type: 'environment.notify', params: { environmentId: ENV, event: { type: 'environment.allocation_lost', allocationId: ID, reason: 'absent', at: 6_000 } } });
    });
  });

  it('should refuse a claim before it is ready, while something uses it, and of an environment\'s own allocation', () => {
    spec.given([intended]).when(claimed()).thenRejects('invalid_state');
    spec.given([intended, ready, use]).when(claimed()).thenRejects('invalid_state');
    const own = { ...intended, environmentId: ENV };
    spec.given([own, ready]).when(claimed(OTHER, 1)).thenRejects('invalid_state');
  });
});
