/**
 * The actor test kit, for Berth's own tests and for users' machines: given/when/then specifications that decide
 * exactly as the runtime does (zod, `can`, pure transition) without a store, and a restart check that rehydrates an
 * actor in a fresh runtime and compares it with the live one.
 *
 *   actorSpec(counter).given([{ type: 'counter.incremented', by: 2 }])
 *     .when({ type: 'counter.incremented', by: 3 })
 *     .then({ state: 'open', actions: [{ type: 'announce', params: { count: 5 } }] });
 */
import { deepStrictEqual, equal, fail } from 'node:assert/strict';
import type { AnyStateMachine, SnapshotFrom, StateValue } from 'xstate';
import { isBerthError, type BerthError, type ErrorCode } from '../../schemas/errors.ts';
import type { ActorRuntime, ActorView } from './actor-runtime.ts';
import type { ActorType, DomainEvent } from './actor-type.ts';
import { decide } from './decide.ts';
import { validateIncoming } from './event-codec.ts';
import { step, type YieldedAction } from './machine-step.ts';
import { freshActor } from './rehydrate.ts';

export interface SpecOutcome<C = any> {
  state: StateValue;
  context: C;
  /** Every action the transition yielded, in order (the runtime runs those with an effect handler). */
  actions: YieldedAction[];
}

export type SpecExpectation<C = any> =
  | ((outcome: SpecOutcome<C>) => void)
  | { state?: StateValue; context?: C; actions?: YieldedAction[] };

export interface WhenStep<C = any> {
  /** Asserts the event is accepted, then checks the outcome; returns it. */
  then(expected: SpecExpectation<C>): SpecOutcome<C>;
  /** Asserts the event is refused with this code (`invalid_request` for a schema refusal); returns the error. */
  thenRejects(code: ErrorCode): BerthError;
}

export interface GivenStep<C = any> {
  when(event: DomainEvent): WhenStep<C>;
}

export function actorSpec<C = any>(actorType: ActorType, opts: { actorId?: string } = {}) {
  const actorId = opts.actorId ?? 'spec';
  const given = (history: DomainEvent[]): GivenStep<C> => ({
    when: (event) => whenStep<C>(actorType, actorId, history, event),
  });
  return { given, when: (event: DomainEvent) => given([]).when(event) };
}

/**
 * The snapshot after `history`, folded as `given` folds it: each event validated by its zod schema and required to be
 * acceptable (`can`), so a typo in a history fails instead of folding into a state the runtime never reaches. For
 * specs that read a machine helper or a rejection's detail.
 */
export function snapshotAfter<M extends AnyStateMachine>(actorType: ActorType<M>, actorId: string, history: DomainEvent[]): SnapshotFrom<M> {
  let { snapshot } = freshActor(actorType, actorId);
  history.forEach((raw, i) => {
    const e = validateIncoming(actorType, raw);
    if (!snapshot.can(e)) fail(`given event #${i} (${e.type}) is not accepted in state ${JSON.stringify(snapshot.value)}`);
    [snapshot] = step(actorType.machine, snapshot, e);
  });
  return snapshot as SnapshotFrom<M>;
}

function whenStep<C>(actorType: ActorType, actorId: string, history: DomainEvent[], event: DomainEvent): WhenStep<C> {
  const snapshot = snapshotAfter(actorType, actorId, history);
  const run = () => decide(actorType, snapshot, validateIncoming(actorType, event));
  return {
    then(expected) {
      const d = run();
      if (!d.accepted) fail(`expected ${event.type} to be accepted, it was rejected: ${d.error.code} ${d.error.message}`);
      const outcome: SpecOutcome<C> = { state: d.next.value, context: d.next.context, actions: d.actions };
      if (typeof expected === 'function') expected(outcome);
      else {
        if ('state' in expected) deepStrictEqual(outcome.state, expected.state);
        if ('context' in expected) deepStrictEqual(outcome.context, expected.context);
        if ('actions' in expected) deepStrictEqual(outcome.actions, expected.actions);
      }
      return outcome;
    },
    thenRejects(code) {
      let d: ReturnType<typeof run>;
      try {
        d = run();
      } catch (e) {
        if (!isBerthError(e)) throw e;
        equal(e.code, code, `expected rejection ${code}, got ${e.code}: ${e.message}`);
        return e;
      }
      if (d.accepted) fail(`expected ${event.type} to be rejected with ${code}, it was accepted (-> ${JSON.stringify(d.next.value)})`);
      equal(d.error.code, code, `expected rejection ${code}, got ${d.error.code}: ${d.error.message}`);
      return d.error;
    },
  };
}

/**
 * Rehydrates `type`/`id` in a fresh runtime (from its stream and snapshots only) and asserts its state, context and
 * revision equal the live runtime's. The fresh runtime needs the same actor types registered; it is not started.
 */
export async function restartCheck(
  live: ActorRuntime<any>,
  freshRuntime: () => ActorRuntime<any> | Promise<ActorRuntime<any>>,
  type: string,
  id: string,
): Promise<ActorView> {
  const before = await live.get(type, id);
  const after = await (await freshRuntime()).get(type, id);
  if (!before || !after) fail(`${type}-${id} has no stream`);
  deepStrictEqual(
    { state: after.state, context: after.context, revision: after.revision, status: after.status },
    { state: before.state, context: before.context, revision: before.revision, status: before.status },
  );
  return after;
}
