/**
 * The four machines wrapped as actor types for the test kit (`actorSpec`), with no effect handlers: specs check the
 * actions a transition names, never run them. `snapshotAfter` folds a history for specs that read a rejection's
 * detail, which the kit does not expose; `persistedRoundTrip` checks a snapshot survives the snapshot stream.
 */
import { initialTransition, transition, type AnyStateMachine, type SnapshotFrom } from 'xstate';
import { allocationEvents } from '../../../schemas/events/allocation.ts';
import { environmentEvents } from '../../../schemas/events/environment.ts';
import { executionEvents } from '../../../schemas/events/execution.ts';
import { sessionEvents } from '../../../schemas/events/session.ts';
import { defineActor, type DomainEvent } from '../../../src/actors/index.ts';
import { persist, restore } from '../../../src/actors/machine-step.ts';
import * as allocation from '../../../src/machines/allocation.machine.ts';
import * as environment from '../../../src/machines/environment.machine.ts';
import * as execution from '../../../src/machines/execution.machine.ts';
import * as session from '../../../src/machines/session.machine.ts';

const input = (id: string) => ({ id });

export const environmentActor = defineActor({
  type: 'environment',
  machine: environment.environmentMachine,
  input,
  events: environmentEvents,
  effects: {},
  reject: environment.reject,
  finished: environment.finished,
});

export const allocationActor = defineActor({
  type: 'allocation',
  machine: allocation.allocationMachine,
  input,
  events: allocationEvents,
  effects: {},
  reject: allocation.reject,
  finished: allocation.finished,
});

export const sessionActor = defineActor({
  type: 'session',
  machine: session.sessionMachine,
  input,
  events: sessionEvents,
  effects: {},
  reject: session.reject,
  finished: session.finished,
});

export const executionActor = defineActor({
  type: 'execution',
  machine: execution.executionMachine,
  input,
  events: executionEvents,
  effects: {},
  reject: execution.reject,
  finished: execution.finished,
});

/** The snapshot after folding `events` (assumed valid and accepted) into a fresh `machine` named `id`. */
export function snapshotAfter<M extends AnyStateMachine>(machine: M, id: string, events: DomainEvent[]): SnapshotFrom<M> {
  let [snapshot] = initialTransition(machine as AnyStateMachine, { id });
  for (const e of events) [snapshot] = transition(machine as AnyStateMachine, snapshot, e);
  return snapshot as SnapshotFrom<M>;
}

/** The snapshot as a snapshot stream would give it back: persisted, through JSON, restored. */
export function persistedRoundTrip<M extends AnyStateMachine>(machine: M, snapshot: SnapshotFrom<M>): SnapshotFrom<M> {
  return restore(machine, JSON.parse(JSON.stringify(persist(machine, snapshot)))) as SnapshotFrom<M>;
}
