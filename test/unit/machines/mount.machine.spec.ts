/**
 * The mount machine (issue 14) as the actor kit runs it, no effects executed: preparation, pins, checkpoint attempts
 * (recorded before capture, each outcome once), detachment that saves first, loss, and what recovery resumes.
 */
import { describe, expect, it } from 'vitest';
import { mountEvents } from '../../../schemas/events/mount.ts';
import { actorSpec, defineActor } from '../../../src/actors/index.ts';
import { mountMachine, reject } from '../../../src/machines/mount.machine.ts';

const WS = `hwsp_${'a'.repeat(32)}`;
const mountActor = defineActor({ type: 'mount', machine: mountMachine, input: (id: string) => ({ id }), events: mountEvents, effects: {}, reject });
const spec = actorSpec(mountActor, { actorId: WS });

const target = { environmentId: `henv_${'b'.repeat(32)}`, allocationId: 'alloc-1', generation: 1 };
const other = { ...target, allocationId: 'alloc-2', generation: 2 };
const manifest = (c: string) => `sha256:${c.repeat(64)}`;
const prepare = (t = target, mountGeneration = 1, at = 1_000) => ({ type: 'mount.prepare_requested', scope: 'alice', target: t, mountGeneration, base: { revision: 3, manifest: manifest('1') }, at });
const prepared = { type: 'mount.prepared', at: 1_100 };
const pinned = (executionId: string) => ({ type: 'mount.pinned', executionId, at: 1_200 });
const unpinned = (executionId: string) => ({ type: 'mount.unpinned', executionId, at: 1_900 });
const started = (attemptId: string, reason = 'execution', at = 1_500) => ({
  type: 'mount.checkpoint_started',
  attemptId,
  reason,
  ...(reason === 'execution' ? { executionId: attemptId } : {}),
  bindingGeneration: 1,
  target,
  mountGeneration: 1,
  baseRevision: 3,
  at,
});
const published = (attemptId: string, revision = 4) => ({ type: 'mount.checkpoint_published', attemptId, checkpointId: manifest('2'), revision, view: { revision, manifest: manifest('2') }, at: 1_600 });
const stale = (attemptId: string) => ({ type: 'mount.checkpoint_stale', attemptId, head: 5, at: 1_600 });
const detach = (reason = 'release') => ({ type: 'mount.detach_requested', reason, at: 2_000 });
const recovered = { type: 'runtime.recovered', runtimeId: 'rt', epoch: 2, at: 9_000 };
const active = [prepare(), prepared];

describe('mount machine', () => {
  it('prepares on a target and materializes the head there; recovery materializes the same again', () => {
    spec.when(prepare()).then(({ state, actions }) => {
      expect(state).toBe('preparing');
      expect(actions).toEqual([{ type: 'mount.materialize', params: { workspaceId: WS, target, mountGeneration: 1, base: { revision: 3, manifest: manifest('1') }, previousAllocationId: null } }]);
    });
    spec.given([prepare()]).when(recovered).then(({ actions }) => expect(actions.map((a) => a.type)).toEqual(['mount.materialize']));
    spec.given([...active]).when(prepare(other, 2)).thenRejects('invalid_state');
  });

  it('records an attempt before its capture, each outcome once; recovery resumes the attempts still capturing', () => {
    spec.given([...active, pinned('x1')]).when(started('x1')).then(({ context, actions }) => {
      expect(context.attempts.x1).toMatchObject({ status: 'capturing', baseRevision: 3, mountGeneration: 1 });
      expect(actions).toEqual([{ type: 'mount.capture', params: { workspaceId: WS, attemptIds: ['x1'] } }]);
    });
    spec.given([...active, started('x1')]).when(started('x1')).thenRejects('invalid_state');
    spec.given([...active, started('x1'), started('x2', 'explicit')]).when(recovered).then(({ actions }) =>
      expect(actions).toEqual([{ type: 'mount.capture', params: { workspaceId: WS, attemptIds: ['x1', 'x2'] } }]),
    );
    spec.given([...active, started('x1'), published('x1')]).when(published('x1')).thenRejects('invalid_state');
    spec.given([...active, started('x1'), stale('x1')]).when(recovered).then(({ context, actions }) => {
      expect(context.attempts.x1!.status).toBe('stale');
      expect(actions).toEqual([{ type: 'mount.capture', params: { workspaceId: WS, attemptIds: [] } }]);
    });
  });

  it('is not detached while pinned; a detachment saves first, recaptures after a stale save, then gives the use back', () => {
    spec.given([...active, pinned('x1')]).when(detach('explicit')).thenRejects('workspace_busy');
    spec.given([...active, pinned('x1'), unpinned('x1')]).when(detach()).then(({ state, actions }) => {
      expect(state).toBe('saving');
      expect(actions).toEqual([{ type: 'mount.begin_save', params: { workspaceId: WS } }]);
    });
    const saving = [...active, detach(), started('detach-1-1', 'detach')];
    spec.given(saving).when(pinned('x9')).thenRejects('workspace_busy');
    spec.given(saving).when(stale('detach-1-1')).then(({ state, actions }) => {
      expect(state).toBe('saving');
      expect(actions).toEqual([{ type: 'mount.begin_save', params: { workspaceId: WS } }]);
    });
    spec.given(saving).when(published('detach-1-1')).then(({ state, actions }) => {
      expect(state).toBe('detaching');
      expect(actions).toEqual([{ type: 'mount.unuse', params: { workspaceId: WS, allocationId: 'alloc-1' } }]);
    });
    // A save past the capture limits can never succeed: the view is given up unsaved; any other failure keeps saving.
    const failed = (code: string) => ({ type: 'mount.checkpoint_failed', attemptId: 'detach-1-1', code, message: 'no', at: 1_700 });
    spec.given(saving).when(failed('quota_exceeded')).then(({ state, actions }) => {
      expect(state).toBe('detaching');
      expect(actions.map((a) => a.type)).toEqual(['mount.unuse']);
    });
    spec.given(saving).when(failed('unavailable')).then(({ state, actions }) => {
      expect(state).toBe('saving');
      expect(actions).toEqual([]);
    });
    spec.given([...saving, published('detach-1-1')]).when(recovered).then(({ actions }) => expect(actions.map((a) => a.type)).toEqual(['mount.unuse']));
    spec.given([...saving, published('detach-1-1'), { type: 'mount.detached', at: 3_000 }]).when(prepare(other, 2)).then(({ state, context }) => {
      expect(state).toBe('preparing');
      expect(context.previousAllocationId).toBe('alloc-1');
    });
  });

  it('a lost allocation leaves the view unavailable (open attempts failed, pins dropped); the next view is at a new generation elsewhere', () => {
    const lost = { type: 'mount.lost', allocationId: 'alloc-1', reason: 'gone', at: 5_000 };
    spec.given([...active, pinned('x1'), started('x1')]).when(lost).then(({ state, context }) => {
      expect(state).toBe('unavailable');
      expect(context.attempts.x1!.status).toBe('failed');
      expect(context.pins).toEqual([]);
    });
    spec.given([...active]).when({ ...lost, allocationId: 'alloc-2' }).thenRejects('invalid_state');
    spec.given([...active, lost]).when(pinned('x2')).thenRejects('workspace_unavailable');
    spec.given([...active, lost]).when(prepare(other, 2)).then(({ state, context, actions }) => {
      expect(state).toBe('preparing');
      expect(context.mountGeneration).toBe(2);
      expect(actions[0]).toMatchObject({ type: 'mount.materialize', params: { previousAllocationId: 'alloc-1', target: other } });
    });
    spec.given([...active, lost]).when(detach()).then(({ state, actions }) => {
      expect(state).toBe('detaching');
      expect(actions.map((a) => a.type)).toEqual(['mount.unuse']);
    });
  });
});
