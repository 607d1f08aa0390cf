/**
 * The lease machine (issue 15) as the actor kit runs it, no effects executed: binding, the private environment made
 * once, pause (attempts counted, the timer's retryAt kept), hold (timer stopped), resume, reclaim only of its own
 * machine and only while paused or held, release and its recovery.
 */
import { describe, expect, it } from 'vitest';
import { leaseEvents } from '../../../schemas/events/lease.ts';
import { actorSpec, defineActor } from '../../../src/actors/index.ts';
import { leaseMachine, reject } from '../../../src/machines/lease.machine.ts';

const ID = `hlse_${'c'.repeat(32)}`;
const ENV = `henv_${'d'.repeat(32)}`;
const leaseActor = defineActor({ type: 'lease', machine: leaseMachine, input: (id: string) => ({ id }), events: leaseEvents, effects: {}, reject });
const spec = actorSpec(leaseActor, { actorId: ID });

const bound = { type: 'lease.bound', scope: 'alice', key: 'wf-1', work: { kind: 'step', id: 's1' }, profile: { provider: 'docker' }, idleSeconds: 60, at: 1_000 };
const made = { type: 'lease.environment_made', environmentId: ENV, at: 1_100 };
const acquired = (allocationId = 'alloc-1', generation = 1) => ({ type: 'lease.acquired', allocationId, generation, at: 1_200 });
const paused = (at = 2_000, retryAt?: number) => ({ type: 'lease.paused', cause: { kind: 'rate_limited' }, ...(retryAt ? { retryAt } : {}), at });
const held = { type: 'lease.held', at: 3_000 };
const resumed = { type: 'lease.resumed', by: 'request', at: 4_000 };
const reclaimed = (allocationId = 'alloc-1') => ({ type: 'lease.reclaimed', allocationId, at: 5_000 });
const running = [bound, made, acquired()];

describe('lease machine', () => {
  it('binds without a machine, records its private environment once and the machine it acquired', () => {
    spec.when(bound).then(({ state, context }) => expect([state, context.environmentId, context.machine]).toEqual(['running', null, null]));
    spec.given([bound, made]).when({ ...made, environmentId: `henv_${'e'.repeat(32)}` }).thenRejects('invalid_state');
    spec.given([bound, made]).when(acquired()).then(({ context }) => expect(context.machine).toEqual({ allocationId: 'alloc-1', generation: 1 }));
    spec.given([bound]).when(bound).thenRejects('invalid_state');
  });

  it('a pause counts its attempt and keeps its retryAt; a hold stops the timer; a resume clears the pause', () => {
    spec.given(running).when(paused(2_000, 9_000)).then(({ state, context }) => {
      expect(state).toBe('paused');
      expect(context.pause).toEqual({ state: 'paused', cause: { kind: 'rate_limited' }, attempt: 1, pausedAt: 2_000, retryAt: 9_000 });
    });
    spec.given([...running, paused(2_000, 9_000)]).when(held).then(({ state, context }) => {
      expect(state).toBe('held');
      expect(context.pause).toMatchObject({ state: 'held', attempt: 1, pausedAt: 2_000, retryAt: null });
    });
    spec.given([...running, paused(), resumed]).when(paused(6_000)).then(({ context }) => expect(context.pause?.attempt).toBe(2));
    spec.given([...running, paused(), held]).when(resumed).then(({ state, context }) => expect([state, context.pause]).toEqual(['running', null]));
    spec.given([...running, paused(), held]).when(paused()).thenRejects('invalid_state');
  });

  it('reclaims only its own machine and only while paused or held', () => {
    spec.given(running).when(reclaimed()).thenRejects('invalid_state');
    spec.given([...running, paused()]).when(reclaimed('alloc-9')).thenRejects('invalid_state');
    spec.given([...running, paused()]).when(reclaimed()).then(({ state, context }) => expect([state, context.machine]).toEqual(['paused', null]));
    spec.given([...running, paused(), reclaimed(), resumed]).when(acquired('alloc-2', 2)).then(({ context }) => expect(context.machine).toEqual({ allocationId: 'alloc-2', generation: 2 }));
  });

  it('release removes the private environment, again after a recovery, and ends the lease', () => {
    const remove = { type: 'lease.remove', params: { leaseId: ID, scope: 'alice', environmentId: ENV } };
    spec.given([...running, paused()]).when({ type: 'lease.release_requested', at: 7_000 }).then(({ state, actions }) => {
      expect(state).toBe('releasing');
      expect(actions).toEqual([remove]);
    });
    const releasing = [...running, { type: 'lease.release_requested', at: 7_000 }];
    spec.given(releasing).when({ type: 'runtime.recovered', runtimeId: 'rt', epoch: 2, at: 8_000 }).then(({ actions }) => expect(actions).toEqual([remove]));
    spec.given(releasing).when(acquired('alloc-3', 3)).thenRejects('invalid_state');
    spec.given(releasing).when({ type: 'lease.released', at: 9_000 }).then(({ state }) => expect(state).toBe('released'));
  });
});
