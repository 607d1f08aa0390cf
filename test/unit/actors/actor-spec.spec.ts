import { AssertionError } from 'node:assert';
import { describe, expect, it } from 'vitest';
import { actorSpec, snapshotAfter } from '../../../src/actors/testing.ts';
import { counterActor } from '../../fixtures/actors/counter.actor.ts';

const inc = (by: number) => ({ type: 'counter.incremented', by });

describe('actorSpec (given / when / then)', () => {
  it('checks the state and the actions an accepted event yields', () => {
    actorSpec(counterActor)
      .given([inc(4), inc(4)])
      .when(inc(3))
      .then({ state: 'open', actions: [{ type: 'announce', params: { count: 11 } }] });
  });

  it('hands state, context and actions to a function expectation', () => {
    const outcome = actorSpec(counterActor, { actorId: 'x' })
      .when(inc(2))
      .then(({ state, context, actions }) => {
        expect(state).toBe('open');
        expect(context).toMatchObject({ id: 'x', count: 2 });
        expect(actions).toEqual([]);
      });
    expect(outcome.context.count).toBe(2);
  });

  it('checks typed rejections, schema refusals included', () => {
    const err = actorSpec(counterActor, { actorId: 'small' }).given([inc(5)]).when(inc(1)).thenRejects('invalid_request');
    expect(err.detail).toMatchObject({ count: 5, limit: 5 });
    actorSpec(counterActor).given([{ type: 'counter.closed' }]).when(inc(1)).thenRejects('invalid_state');
    actorSpec(counterActor).when({ type: 'counter.incremented', by: -1 }).thenRejects('invalid_request');
  });

  it('fails when the expectation does not hold', () => {
    expect(() => actorSpec(counterActor).when(inc(1)).then({ state: 'closed' })).toThrow(AssertionError);
    expect(() => actorSpec(counterActor).when(inc(1)).thenRejects('invalid_state')).toThrow(/accepted/);
    expect(() => actorSpec(counterActor).given([{ type: 'counter.closed' }]).when(inc(1)).then({})).toThrow(
      /rejected: invalid_state/,
    );
  });

  it('refuses a history the machine would not have accepted', () => {
    expect(() =>
      actorSpec(counterActor).given([{ type: 'counter.closed' }, inc(1)]).when(inc(1)).then({}),
    ).toThrow(/given event #1/);
  });

  it('folds a history for a machine helper with the same checks as given: zod and can', () => {
    expect(snapshotAfter(counterActor, 'x', [inc(2), inc(3)]).context).toMatchObject({ count: 5 });
    expect(() => snapshotAfter(counterActor, 'x', [inc(1), { type: 'counter.incremented', by: -1 }])).toThrow(/invalid|by/i);
    expect(() => snapshotAfter(counterActor, 'x', [{ type: 'counter.closed' }, inc(1)])).toThrow(/given event #1/);
  });

  it('offers runtime.recovered to every actor type', () => {
    actorSpec(counterActor)
      .given([inc(3)])
      .when({ type: 'runtime.recovered', runtimeId: 'r', epoch: 2, at: 0 })
      .then({ actions: [{ type: 'inspect', params: { count: 3 } }] });
  });
});
