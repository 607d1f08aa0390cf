import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { environmentMachine, finished } from '../../../src/machines/environment.machine.ts';
import { environmentActor, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'c'.repeat(32)}`;
const spec = actorSpec(environmentActor, { actorId: ENV });
const profile = { provider: 'native' as const };
const created = { type: 'environment.created', name: 'Studio', slug: 'studio', scope: 'team-a', profile, at: 1_000 };
const build = (version: number, at = 2_000 + version) => ({ type: 'environment.build_requested', version, at });
const outcome = (version: number, status: 'ready' | 'failed', at = 3_000 + version) => ({
  type: 'environment.build_finished',
  version,
  status,
  error: status === 'failed' ? 'setup.sh exited with code 2' : '',
  packages: status === 'ready' ? 2 : 0,
  sizeBytes: 100,
  at,
});
const activate = (version: number) => ({ type: 'environment.version_activated', version, at: 8_000 });
const recovered = { type: 'runtime.recovered', runtimeId: 'rt-1', epoch: 2, at: 9_000 };
const acquire = { type: 'environment.acquisition_requested', allocationId: 'alloc-1', requestId: 'req-1', generation: 1, at: 1_500 };
const allocated = { type: 'environment.allocated', allocationId: 'alloc-1', generation: 1, at: 1_600 };
const start = (version: number) => ({
  type: 'build.start',
  params: { environmentId: ENV, version, scope: 'team-a', slug: 'studio', profile },
});

describe('environment machine: content versions', () => {
  it('should start the next version and create its build actor, whatever the allocation state', () => {
    spec.given([created]).when(build(1)).then(({ state, context, actions }) => {
      expect(state).toBe('idle');
      expect(actions).toEqual([start(1)]);
      expect(context).toMatchObject({ latestVersion: 1, building: 1, activeVersion: null });
      expect(context.versions).toEqual([{ version: 1, status: 'building', startedAt: 2_001, finishedAt: null, packages: 0, sizeBytes: 0, error: '' }]);
    });
    spec.given([created, acquire, allocated]).when(build(1)).then({ state: 'allocated', actions: [start(1)] });
  });

  it('should run one build at a time (environment_busy) and refuse a version that is not the next', () => {
    spec.given([created, build(1)]).when(build(2)).thenRejects('environment_busy');
    spec.given([created]).when(build(2)).thenRejects('invalid_state');
    spec.given([created, build(1), outcome(1, 'ready')]).when(build(1)).thenRejects('invalid_state');
  });

  it('should activate a successful build and leave the active version alone when one fails', () => {
    spec.given([created, build(1)]).when(outcome(1, 'ready')).then(({ context }) => {
      expect(context).toMatchObject({ activeVersion: 1, building: null });
      expect(context.versions[0]).toMatchObject({ status: 'ready', finishedAt: 3_001, packages: 2 });
    });
    spec.given([created, build(1), outcome(1, 'ready'), build(2)]).when(outcome(2, 'failed')).then(({ context }) => {
      expect(context).toMatchObject({ activeVersion: 1, latestVersion: 2, building: null });
      expect(context.versions[1]).toMatchObject({ status: 'failed', error: 'setup.sh exited with code 2' });
    });
  });

  it('should accept only the outcome of the build under way', () => {
    spec.given([created, build(1)]).when(outcome(2, 'ready')).thenRejects('invalid_state');
    spec.given([created, build(1), outcome(1, 'failed')]).when(outcome(1, 'ready')).thenRejects('invalid_state');
  });

  it('should roll back to an earlier ready version without building, and refuse unfinished or unknown versions', () => {
    const history = [created, build(1), outcome(1, 'ready'), build(2), outcome(2, 'ready')];
    spec.given(history).when(activate(1)).then(({ context, actions }) => {
      expect(context.activeVersion).toBe(1);
      expect(actions).toEqual([]);
    });
    spec.given([...history, build(3)]).when(activate(3)).thenRejects('environment_not_ready');
    spec.given([...history, build(3), outcome(3, 'failed')]).when(activate(3)).thenRejects('environment_not_ready');
    spec.given(history).when(activate(7)).thenRejects('not_found');
  });

  it('should refuse deletion while a build runs, and allow it after', () => {
    spec.given([created, build(1)]).when({ type: 'environment.deleted', at: 5_000 }).thenRejects('environment_busy');
    spec.given([created, build(1), outcome(1, 'failed')]).when({ type: 'environment.deleted', at: 5_000 }).then({ state: 'deleted' });
  });

  it('should count an idle environment with a build under way as unfinished and reconcile the build on recovery', () => {
    expect(finished(snapshotAfter(environmentActor, ENV, [created, build(1)]))).toBe(false);
    expect(finished(snapshotAfter(environmentActor, ENV, [created, build(1), outcome(1, 'ready')]))).toBe(true);
    spec.given([created, build(1)]).when(recovered).then({ state: 'idle', actions: [{ type: 'build.reconcile', params: { environmentId: ENV, version: 1 } }] });
    spec.given([created]).when(recovered).thenRejects('invalid_state');
  });

  it('should re-send the allocation intent and reconcile the build when both are under way', () => {
    spec.given([created, acquire, build(1)]).when(recovered).then(({ actions }) => {
      expect(actions.map((a) => a.type)).toEqual(['allocation.intend', 'build.reconcile']);
    });
    spec.given([created, acquire]).when(recovered).then(({ actions }) => expect(actions.map((a) => a.type)).toEqual(['allocation.intend']));
  });

  it('should stamp content events into updatedAt', () => {
    spec.given([created]).when(build(1, 4_000)).then(({ context }) => expect(context.updatedAt).toBe(4_000));
  });
});
