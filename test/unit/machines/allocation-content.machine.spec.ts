/**
 * The content version a Docker allocation binds (seed 001 §6): carried from the intent into every provider call, kept
 * through reports and persisted snapshots, and refused when malformed.
 */
import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { allocationMachine } from '../../../src/machines/allocation.machine.ts';
import { allocationActor, persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'c'.repeat(32)}`;
const ID = 'alloc-content-1';
const spec = actorSpec(allocationActor, { actorId: ID });
const profile = { provider: 'docker' as const };
const mounts = [{ source: `/data/environments/${ENV}/versions/2`, target: '/env/studio' }];
const identity = { provider: 'docker' as const, resourceId: 'c0ffee', incarnation: 'c0ffee@2025-01-01T00:00:00Z' };
const intended = { type: 'allocation.intended', environmentId: ENV, requestId: 'req-c', generation: 1, profile, contentVersion: 2, mounts, at: 1_000 };
const ready = { type: 'allocation.reported', report: { status: 'ready', identity }, at: 2_000 };

describe('allocation machine: the content version bound at allocation', () => {
  it('should hand the bound version and its read-only mounts to the provider with the intent', () => {
    spec.when(intended).then(({ context, actions }) => {
      expect(context).toMatchObject({ contentVersion: 2, mounts });
      expect(actions).toEqual([
        { type: 'provider.allocate', params: { allocationId: ID, requestId: 'req-c', environmentId: ENV, generation: 1, profile, contentVersion: 2, mounts } },
      ]);
    });
  });

  it('should keep the binding once ready, for inspection and release, and through a persisted snapshot', () => {
    spec.given([intended, ready]).when({ type: 'runtime.recovered', runtimeId: 'rt', epoch: 2, at: 3_000 }).then(({ context, actions }) => {
      expect(context.contentVersion).toBe(2);
      expect(actions[0]).toMatchObject({ type: 'provider.inspect', params: { contentVersion: 2, mounts, identity } });
    });
    const restored = persistedRoundTrip(allocationMachine, snapshotAfter(allocationActor, ID, [intended, ready]));
    expect(restored.context).toMatchObject({ contentVersion: 2, mounts });
  });

  it('should bind nothing when the intent names no version', () => {
    const { contentVersion: _v, mounts: _m, ...plain } = intended;
    spec.when(plain).then(({ context, actions }) => {
      expect(context).not.toHaveProperty('contentVersion');
      expect(actions[0].params).not.toHaveProperty('mounts');
    });
  });

  it('should refuse a mount outside /env/<slug> or a version that is not a positive integer', () => {
    spec.when({ ...intended, mounts: [{ source: '/data', target: '/etc' }] }).thenRejects('invalid_request');
    spec.when({ ...intended, contentVersion: 0 }).thenRejects('invalid_request');
  });
});
