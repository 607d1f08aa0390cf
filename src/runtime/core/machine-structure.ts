/**
 * The structure of a registered actor type's XState machine (states, transitions, the events it takes) as plain
 * JSON, read from the machine object itself, so the web console draws each statechart from the definition it runs.
 */
import type { AnyStateMachine } from 'xstate';
import { BerthError } from '../../../schemas/errors.ts';
import type { MachineStructure } from '../../../schemas/console.ts';
import { actorTypes } from '../registry.ts';

/** The shape of an xstate v5 state node that this module reads (its public fields). */
interface StateNodeLike {
  path: string[];
  type: string;
  key: string;
  initial?: { target: ReadonlyArray<StateNodeLike> };
  states: Record<string, StateNodeLike>;
  transitions: Map<string, ReadonlyArray<{ target?: ReadonlyArray<StateNodeLike>; guard?: unknown; reenter?: boolean }>>;
}

const pathOf = (node: StateNodeLike): string => node.path.join('.');

const guardName = (guard: unknown): string | undefined =>
  typeof guard === 'string' ? guard : guard && typeof guard === 'object' && 'type' in guard ? String(guard.type) : guard ? 'guarded' : undefined;

export function machineStructure(kind: string, machine: AnyStateMachine): MachineStructure {
  const states: MachineStructure['states'] = [];
  const transitions: MachineStructure['transitions'] = [];
  const events = new Set<string>();
  const visit = (node: StateNodeLike, parent: string | null) => {
    const path = pathOf(node);
    if (parent !== null) {
      states.push({ path, parent: parent || null, type: node.type, initial: node.initial?.target[0] ? pathOf(node.initial.target[0]) : null });
    }
    for (const [event, candidates] of node.transitions) {
      events.add(event);
      for (const t of candidates) {
        const targets = (t.target ?? []).map(pathOf);
        // A transition without a target keeps the state (it only changes the context or yields effects).
        transitions.push({ source: path, event, targets: targets.length ? targets : [path], guard: guardName(t.guard) ?? null, internal: targets.length === 0 });
      }
    }
    for (const child of Object.values(node.states)) visit(child, path);
  };
  const root = machine.root as unknown as StateNodeLike;
  visit(root, null);
  return {
    kind,
    initial: root.initial?.target[0] ? pathOf(root.initial.target[0]) : null,
    states,
    transitions,
    events: [...events].sort(),
  };
}

const computed = new Map<string, MachineStructure>();

/** The structure of the actor type named `kind` (computed once: a machine never changes while it runs); `not_found` for a kind no actor type registers. */
export function registeredMachine(kind: string): MachineStructure {
  const type = actorTypes.find((t) => t.type === kind);
  if (!type) throw new BerthError('not_found', `No actor type is named "${kind}".`, { kind, kinds: actorTypes.map((t) => t.type) });
  if (!computed.has(kind)) computed.set(kind, machineStructure(kind, type.machine));
  return computed.get(kind)!;
}

