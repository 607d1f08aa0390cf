/**
 * What the machines' read helpers (`executionStatus`, `reclaimableAt`) take: an actor's state and context. The
 * runtime's actor view is one as it is, and a snapshot gives one through `viewOf`, so no caller forges a snapshot.
 */
import type { StateValue } from 'xstate';

export interface MachineView<C> {
  state: StateValue;
  context: C;
}

export const viewOf = <C>(snapshot: { value: StateValue; context: C }): MachineView<C> => ({
  state: snapshot.value,
  context: snapshot.context,
});
