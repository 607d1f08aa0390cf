/**
 * The machines wrapped as actor types for the test kit (`actorSpec`, `snapshotAfter`), with no effect handlers: specs
 * check the actions a transition names, never run them. `persistedRoundTrip` checks a snapshot survives the snapshot
 * stream.
 */
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import { allocationEvents } from '../../../schemas/events/allocation.ts';
import { environmentEvents } from '../../../schemas/events/environment.ts';
import { executionEvents } from '../../../schemas/events/execution.ts';
import { harnessEvents } from '../../../schemas/events/harness.ts';
import { sessionEvents } from '../../../schemas/events/session.ts';
import { defineActor } from '../../../src/actors/index.ts';
import { persist, restore } from '../../../src/actors/machine-step.ts';
import * as allocation from '../../../src/machines/allocation.machine.ts';
import * as environment from '../../../src/machines/environment.machine.ts';
import * as execution from '../../../src/machines/execution.machine.ts';
import * as harness from '../../../src/machines/harness.machine.ts';
import * as session from '../../../src/machines/session.machine.ts';

export { snapshotAfter } from '../../../src/actors/index.ts';

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

export const harnessActor = defineActor({
  type: 'harness',
  machine: harness.harnessMachine,
  input,
  events: harnessEvents,
  effects: {},
  reject: harness.reject,
});

/** The snapshot as a snapshot stream would give it back: persisted, through JSON, restored. */
export function persistedRoundTrip<M extends AnyStateMachine>(machine: M, snapshot: SnapshotFrom<M>): SnapshotFrom<M> {
  return restore(machine, JSON.parse(JSON.stringify(persist(machine, snapshot)))) as SnapshotFrom<M>;
}
