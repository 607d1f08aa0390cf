/**
 * The statechart the console draws is the machine itself: for every registered actor type, the structure served by
 * GET /v1/machines/{kind} names exactly the machine's state nodes and events, every transition leads to a state it
 * names, and the edges the execution machine takes on a real run are in it.
 */
import { describe, expect, it } from 'vitest';
import { machineStructure, registeredMachine } from '../../../src/runtime/core/machine-structure.ts';
import { actorTypes } from '../../../src/runtime/registry.ts';

describe('machine structure', () => {
  it.each(actorTypes.map((t) => [t.type, t] as const))('should name exactly the state nodes and events of the %s machine', (_, type) => {
    const structure = machineStructure(type.type, type.machine);
    const root = type.machine.root;
    const nodes: string[] = [];
    const walk = (node: typeof root) => {
      for (const child of Object.values(node.states)) {
        nodes.push(child.path.join('.'));
        walk(child);
      }
    };
    walk(root);
    expect(structure.states.map((s) => s.path).sort()).toEqual(nodes.sort());
    expect(structure.events).toEqual([...new Set(root.events)].sort());
    const paths = new Set(nodes);
    expect(paths.has(structure.initial!)).toBe(true);
    for (const t of structure.transitions) {
      expect(paths.has(t.source), `${t.source} --${t.event}-->`).toBe(true);
      for (const target of t.targets) expect(paths.has(target), `${t.source} --${t.event}--> ${target}`).toBe(true);
    }
  });

  it('should hold the path of a finished command: accepted, dispatched, running, exited, drained, saved, released', () => {
    const structure = registeredMachine('execution');
    const edge = (source: string, event: string, target: string) =>
      structure.transitions.some((t) => t.source === source && t.event === event && t.targets.includes(target));
    const run = [
      ['pristine', 'execution.accepted', 'accepted'],
      ['accepted', 'execution.dispatched', 'dispatched'],
      ['dispatched', 'execution.started', 'running'],
      ['running', 'execution.exited', 'exited'],
      ['exited', 'execution.drained', 'drained'],
      ['drained', 'execution.saved', 'saved'],
      ['saved', 'execution.released', 'released'],
    ];
    for (const [source, event, target] of run) expect(edge(source, event, target), `${source} --${event}--> ${target}`).toBe(true);
    expect(edge('released', 'execution.accepted', 'accepted')).toBe(false);
  });

  it('should answer not_found for a kind no actor type registers', () => {
    expect(() => registeredMachine('runtime')).toThrow(expect.objectContaining({ code: 'not_found' }));
  });
});
