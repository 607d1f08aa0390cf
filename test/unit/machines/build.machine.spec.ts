import { describe, expect, it } from 'vitest';
import { buildEvents } from '../../../schemas/events/build.ts';
import { actorSpec, defineActor } from '../../../src/actors/index.ts';
import * as build from '../../../src/machines/build.machine.ts';
import { persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ENV = `henv_${'b'.repeat(32)}`;
const ID = `${ENV}-3`;
const buildActor = defineActor({
  type: 'build',
  machine: build.buildMachine,
  input: (id: string) => ({ id }),
  events: buildEvents,
  effects: {},
  reject: build.reject,
  finished: build.finished,
});
const spec = actorSpec(buildActor, { actorId: ID });

const profile = { provider: 'native' as const };
const requested = { type: 'build.requested', environmentId: ENV, version: 3, scope: 'team-a', slug: 'studio', profile, runtimeId: 'rt-1', epoch: 4, at: 1_000 };
const log = { digest: 'sha256:abc', size: 42 };
const succeeded = {
  type: 'build.succeeded',
  log,
  packages: [{ manager: 'npm', name: 'left-pad', version: '1.3.0' }],
  packageCount: 1,
  sizeBytes: 4096,
  files: 7,
  at: 5_000,
};
const failed = { type: 'build.failed', error: 'npm install exited with code 1', log, at: 6_000 };
const recovered = (epoch: number, runtimeId = 'rt-1') => ({ type: 'runtime.recovered', runtimeId, epoch, at: 9_000 });
const runParams = { buildId: ID, environmentId: ENV, version: 3, slug: 'studio', profile };
const report = (status: 'ready' | 'failed', error: string, packages: number, sizeBytes: number) => ({
  type: 'environment.report',
  params: { environmentId: ENV, version: 3, status, error, packages, sizeBytes, startedAt: 1_000 },
});

describe('build machine', () => {
  it('should persist the request and name the build run as its only effect', () => {
    spec.when(requested).then(({ state, context, actions }) => {
      expect(state).toBe('building');
      expect(actions).toEqual([{ type: 'build.run', params: runParams }]);
      expect(context).toMatchObject({ environmentId: ENV, version: 3, slug: 'studio', epoch: 4, startedAt: 1_000, finishedAt: null });
    });
  });

  it('should record a success with its log and packages and report ready to the environment', () => {
    spec.given([requested]).when(succeeded).then(({ state, context, actions }) => {
      expect(state).toBe('ready');
      expect(context).toMatchObject({ log, packageCount: 1, sizeBytes: 4096, files: 7, finishedAt: 5_000, error: '' });
      expect(actions).toEqual([report('ready', '', 1, 4096)]);
    });
  });

  it('should record a failure with its reason and report it', () => {
    spec.given([requested]).when(failed).then(({ state, context, actions }) => {
      expect(state).toBe('failed');
      expect(context).toMatchObject({ error: 'npm install exited with code 1', log, finishedAt: 6_000 });
      expect(actions).toEqual([report('failed', 'npm install exited with code 1', 0, 0)]);
    });
  });

  it('should fail a build found building by a later epoch, discard its version, and never run it again', () => {
    spec.given([requested]).when(recovered(5)).then(({ state, context, actions }) => {
      expect(state).toBe('failed');
      expect(context.error).toBe(build.INTERRUPTED);
      expect(actions.map((a) => a.type)).toEqual(['build.discard', 'environment.report']);
      expect(actions.some((a) => a.type === 'build.run')).toBe(false);
    });
    spec.given([requested]).when(recovered(1, 'rt-other')).then(({ state }) => expect(state).toBe('failed'));
  });

  it('should not let the epoch that runs the installers declare them interrupted', () => {
    spec.given([requested]).when(recovered(4)).thenRejects('invalid_state');
  });

  it('should be finished once ready or failed, and refuse everything after', () => {
    for (const outcome of [succeeded, failed]) {
      const done = snapshotAfter(buildActor, ID, [requested, outcome]);
      expect(build.finished(done)).toBe(true);
      spec.given([requested, outcome]).when(recovered(9)).thenRejects('invalid_state');
      spec.given([requested, outcome]).when(failed).thenRejects('invalid_state');
    }
    expect(build.finished(snapshotAfter(buildActor, ID, [requested]))).toBe(false);
  });

  it('should refuse a second request as already requested, and any outcome before a request as not found', () => {
    const r = spec.given([requested]).when(requested).thenRejects('invalid_state');
    expect(r.detail).toMatchObject({ reason: 'already_requested' });
    spec.when(succeeded).thenRejects('not_found');
  });

  it('should refuse a build event of the wrong shape', () => {
    spec.when({ ...requested, version: 0 }).thenRejects('invalid_request');
    spec.given([requested]).when({ ...failed, error: '' }).thenRejects('invalid_request');
  });

  it('should give the build status of a snapshot, and survive the snapshot stream', () => {
    const building = snapshotAfter(buildActor, ID, [requested]);
    expect(build.buildStatus(building)).toBe('building');
    expect(build.buildStatus(snapshotAfter(buildActor, ID, [requested, succeeded]))).toBe('ready');
    const restored = persistedRoundTrip(build.buildMachine, building);
    expect(restored.value).toBe('building');
    expect(restored.context).toEqual(building.context);
  });
});
