import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { initialSnapshot, step } from '../../../src/actors/machine-step.ts';
import { replayStream } from '../../../src/actors/replay.ts';
import { CorruptEvent, type RecordedEvent } from '../../../src/store/event-store.ts';
import { counterActor, counterMachine } from '../../fixtures/actors/counter.actor.ts';

const recorded = (
  revision: number,
  type: string,
  data: unknown,
  schemaVersion = type === 'counter.incremented' ? 2 : 1,
): RecordedEvent => ({
  id: `id-${revision}`,
  stream: 'counter-r1',
  revision: BigInt(revision),
  position: BigInt(revision + 1),
  type,
  data,
  metadata: { schemaVersion },
  createdAt: new Date(0).toISOString(),
});

const stream = [
  recorded(0, 'counter.incremented', { amount: 6 }, 1),
  recorded(1, 'counter.incremented', { by: 5 }),
  recorded(2, 'counter.announced', { count: 11 }),
  recorded(3, 'counter.closed', {}),
];

describe('replayStream', () => {
  it('shows each event with the state before and after it and the context it changed', () => {
    const steps = replayStream(counterActor, stream);
    expect(steps.map((s) => [s.stateBefore, s.stateAfter])).toEqual([
      ['open', 'open'],
      ['open', 'open'],
      ['open', 'open'],
      ['open', 'closed'],
    ]);
    expect(steps[0].contextDiff).toEqual({ count: { before: 0, after: 6 } });
    expect(steps[2].contextDiff).toEqual({ announced: { before: [], after: [11] } });
    expect(steps[3].contextDiff).toEqual({});
    expect(steps[0].event).toBe(stream[0]);
  });

  it('gives the same result when replayed twice', () => {
    expect(replayStream(counterActor, stream)).toEqual(replayStream(counterActor, stream));
  });

  it('reports a gap or an undecodable event with its stream and revision', () => {
    expect(() => replayStream(counterActor, [stream[0], stream[2]])).toThrow(/counter-r1@1/);
    const bad = recorded(1, 'counter.incremented', { by: 'x' });
    const err = (() => {
      try {
        replayStream(counterActor, [stream[0], bad]);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CorruptEvent);
    expect((err as CorruptEvent).detail).toEqual({ stream: 'counter-r1', revision: '1' });
  });
});

describe('step (the runtime transition)', () => {
  it("should give what xstate's transition() gives, snapshot and actions", () => {
    let ours = initialSnapshot(counterMachine, { id: 'a' });
    let [theirs] = initialTransition(counterMachine, { id: 'a' });
    for (const by of [3, 9, 1, 20]) {
      const event = { type: 'counter.incremented' as const, by };
      const [nextOurs, actionsOurs] = step(counterMachine, ours, event);
      const [nextTheirs, actionsTheirs] = transition(counterMachine, theirs, event);
      expect(nextOurs.value).toEqual(nextTheirs.value);
      expect(nextOurs.context).toEqual(nextTheirs.context);
      expect(actionsOurs).toEqual(actionsTheirs.map((a) => ({ type: a.type, params: a.params })));
      [ours, theirs] = [nextOurs, nextTheirs];
    }
    expect(ours.context.count).toBe(33);
  });

  it('should not modify the snapshot it starts from', () => {
    const start = initialSnapshot(counterMachine, { id: 'a' });
    step(counterMachine, start, { type: 'counter.incremented', by: 3 });
    expect(start.context.count).toBe(0);
  });
});
