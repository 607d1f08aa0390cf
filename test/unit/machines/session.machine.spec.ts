import { describe, expect, it } from 'vitest';
import { actorSpec } from '../../../src/actors/index.ts';
import { reject, sessionMachine } from '../../../src/machines/session.machine.ts';
import { persistedRoundTrip, sessionActor, snapshotAfter } from './machine-actors.ts';

const spec = actorSpec(sessionActor, { actorId: 'ses-1' });
const ENV_A = `henv_${'a'.repeat(32)}`;
const ENV_B = `henv_${'b'.repeat(32)}`;
const ENV_DEFAULT = `henv_${'d'.repeat(32)}`;

const create = (fields: object = {}) => ({ type: 'session.created', scope: 'team-a', at: 1_000, ...fields });
const parent = (relation: 'child' | 'fork', environmentId: string | null, workspaceId: string | null = 'ws-parent') => ({
  parent: { sessionId: 'ses-0', relation, environmentId, workspaceId },
});
const change = (previous: string | null, next: string | null, at = 2_000) => ({ type: 'session.environment_changed', previous, next, at });

describe('session machine: selection at creation', () => {
  it('should select an explicit Environment and Workspace without allocating', () => {
    spec.when(create({ environmentId: ENV_A, workspaceId: 'ws-1', defaultEnvironmentId: ENV_DEFAULT })).then(({ state, context, actions }) => {
      expect(state).toBe('active');
      expect(actions).toEqual([]);
      expect(context).toMatchObject({ environmentId: ENV_A, environmentSource: 'explicit', workspaceId: 'ws-1' });
    });
  });

  it('should take the configured default when the Environment is omitted', () => {
    spec.when(create({ defaultEnvironmentId: ENV_DEFAULT })).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: ENV_DEFAULT, environmentSource: 'default', workspaceId: null });
    });
    spec.when(create()).then(({ context }) => expect(context).toMatchObject({ environmentId: null, environmentSource: 'none' }));
  });

  it('should disable the default with an explicit null', () => {
    spec.when(create({ environmentId: null, defaultEnvironmentId: ENV_DEFAULT })).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: null, environmentSource: 'disabled' });
    });
  });

  it('should inherit the parent\'s selection (even a disabled one) unless the child sets its own', () => {
    spec.when(create({ ...parent('child', ENV_A), defaultEnvironmentId: ENV_DEFAULT })).then(({ context }) => {
      expect(context).toMatchObject({
        environmentId: ENV_A,
        environmentSource: 'inherited',
        workspaceId: 'ws-parent',
        parent: { sessionId: 'ses-0', relation: 'child' },
      });
    });
    spec.when(create({ ...parent('child', null), defaultEnvironmentId: ENV_DEFAULT })).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: null, environmentSource: 'inherited' });
    });
    spec.when(create({ ...parent('child', ENV_A), environmentId: ENV_B, workspaceId: 'ws-own' })).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: ENV_B, environmentSource: 'explicit', workspaceId: 'ws-own' });
    });
    spec.when(create({ ...parent('child', ENV_A), workspaceId: null })).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: ENV_A, workspaceId: null });
    });
  });

  it('should copy the forked session\'s selection', () => {
    spec.when(create(parent('fork', ENV_B, null))).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: ENV_B, workspaceId: null, parent: { relation: 'fork' } });
    });
  });

  it('should refuse a second creation and events before creation', () => {
    spec.given([create()]).when(create()).thenRejects('invalid_state');
    spec.when(change(null, ENV_A)).thenRejects('not_found');
  });
});

describe('session machine: changing the Environment', () => {
  it('should change the selection when the observed previous one is still current', () => {
    spec.given([create({ environmentId: ENV_A })]).when(change(ENV_A, ENV_B)).then(({ context, actions }) => {
      expect(actions).toEqual([]);
      expect(context).toMatchObject({ environmentId: ENV_B, environmentSource: 'explicit', updatedAt: 2_000 });
    });
    spec.given([create({ environmentId: ENV_A })]).when(change(ENV_A, null)).then(({ context }) => {
      expect(context).toMatchObject({ environmentId: null, environmentSource: 'disabled' });
    });
  });

  it('should refuse a change based on a stale observation', () => {
    spec.given([create({ environmentId: ENV_A })]).when(change(ENV_B, null)).thenRejects('invalid_state');
    const r = reject(snapshotAfter(sessionActor, 'ses-1', [create({ environmentId: ENV_A })]), change(ENV_B, null));
    expect(r.detail).toMatchObject({ reason: 'previous_mismatch', environmentId: ENV_A });
    spec.given([create({ environmentId: ENV_A })]).when(change(ENV_A, ENV_A)).thenRejects('invalid_state');
  });

  it('should refuse everything once deleted', () => {
    const deleted = [create({ environmentId: ENV_A }), { type: 'session.deleted', at: 1_500 }];
    spec.given(deleted).when(change(ENV_A, ENV_B)).thenRejects('not_found');
    spec.given(deleted).when({ type: 'session.deleted', at: 1_600 }).thenRejects('not_found');
  });
});

describe('session machine: snapshots', () => {
  it('should restore a persisted snapshot to the same state and context', () => {
    const s = snapshotAfter(sessionActor, 'ses-1', [create({ ...parent('fork', ENV_A) }), { type: 'session.deleted', at: 1_500 }]);
    const r = persistedRoundTrip(sessionMachine, s);
    expect([r.value, r.context]).toStrictEqual([s.value, s.context]);
  });
});
