import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { harnessActor, persistedRoundTrip, snapshotAfter } from './machine-actors.ts';

const ID = 'hhrn_1';
const ENV = `henv_${'a'.repeat(32)}`;
const OTHER_ENV = `henv_${'b'.repeat(32)}`;
const spec = actorSpec(harnessActor, { actorId: ID });

const created = { type: 'harness.created', scope: 'team-a', name: 'claude', base: 'claude-code', environmentId: ENV, at: 1_000 };
const updated = (fields: object, at = 2_000) => ({ type: 'harness.updated', ...fields, at });
const deleted = (at = 3_000) => ({ type: 'harness.deleted', at });

describe('harness machine: create', () => {
  it('should record name, base and environment as given, and yield no actions', () => {
    spec.when(created).then({
      state: 'active',
      actions: [],
      context: { id: ID, scope: 'team-a', name: 'claude', base: 'claude-code', environmentId: ENV, createdAt: 1_000, updatedAt: 1_000 },
    });
  });

  it('should keep base and environment null when omitted', () => {
    spec.when({ type: 'harness.created', scope: 'team-a', name: 'bare', at: 1_000 }).then(({ context }) => {
      expect(context).toMatchObject({ base: null, environmentId: null });
    });
  });

  it('should refuse a second create as invalid_state, and a malformed one as invalid_request', () => {
    const err = spec.given([created]).when({ ...created, at: 1_500 }).thenRejects('invalid_state');
    expect(err.detail).toMatchObject({ state: 'active', type: 'harness.created' });
    spec.when({ ...created, name: '   ' }).thenRejects('invalid_request');
    spec.when({ ...created, environmentId: 'env-1' }).thenRejects('invalid_request');
  });
});

describe('harness machine: update', () => {
  it('should change only the fields given', () => {
    spec.given([created]).when(updated({ name: 'renamed' })).then(({ context }) => {
      expect(context).toMatchObject({ name: 'renamed', base: 'claude-code', environmentId: ENV, updatedAt: 2_000 });
    });
    spec.given([created]).when(updated({ environmentId: OTHER_ENV })).then(({ context }) => {
      expect(context).toMatchObject({ name: 'claude', environmentId: OTHER_ENV });
    });
  });

  it('should clear base and environment with null', () => {
    spec.given([created]).when(updated({ base: null, environmentId: null })).then(({ context }) => {
      expect(context).toMatchObject({ name: 'claude', base: null, environmentId: null });
    });
  });

  it('should move updatedAt forward even when the clock did not', () => {
    spec.given([created]).when(updated({ name: 'same-ms' }, 1_000)).then(({ context }) => expect(context.updatedAt).toBe(1_001));
  });

  it('should answer not_found for an update before create or after delete', () => {
    spec.when(updated({ name: 'ghost' })).thenRejects('not_found');
    spec.given([created, deleted()]).when(updated({ name: 'ghost' }, 4_000)).thenRejects('not_found');
  });
});

describe('harness machine: delete', () => {
  it('should end the actor (final state) and keep the last record', () => {
    spec.given([created, updated({ name: 'renamed' })]).when(deleted()).then(({ state, context, actions }) => {
      expect(state).toBe('deleted');
      expect(actions).toEqual([]);
      expect(context).toMatchObject({ name: 'renamed', updatedAt: 3_000 });
    });
    expect(snapshotAfter(harnessActor, ID, [created, deleted()]).status).toBe('done');
  });

  it('should answer not_found for a delete before create or a second delete', () => {
    spec.when(deleted()).thenRejects('not_found');
    spec.given([created, deleted()]).when(deleted(4_000)).thenRejects('not_found');
  });

  it('should survive the snapshot stream', () => {
    const s = snapshotAfter(harnessActor, ID, [created, updated({ base: null })]);
    const restored = persistedRoundTrip(harnessActor.machine, s);
    expect(restored.value).toBe('active');
    expect(restored.context).toEqual(s.context);
  });
});
