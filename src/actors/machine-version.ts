/**
 * The version of a machine definition: a digest of its states and transitions (`toJSON`) and of the source of its
 * guards, actions and delays. A snapshot records the version of the machine that folded it and is restored only by
 * that same machine, so snapshot + later events always equal a full replay by today's machine (a changed machine
 * folds from the first event instead).
 */
import { createHash } from 'node:crypto';
import type { AnyStateMachine } from 'xstate';

const versions = new WeakMap<AnyStateMachine, string>();

const sources = (named: Record<string, unknown> | undefined): string =>
  Object.entries(named ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, fn]) => `${name}:${String(fn)}`)
    .join('\n');

export function machineVersion(machine: AnyStateMachine): string {
  let version = versions.get(machine);
  if (!version) {
    const { guards, actions, delays } = machine.implementations as unknown as Record<string, Record<string, unknown> | undefined>;
    version = createHash('sha256')
      .update(JSON.stringify(machine.toJSON()))
      .update(`\0${sources(guards)}\0${sources(actions)}\0${sources(delays)}`)
      .digest('hex')
      .slice(0, 16);
    versions.set(machine, version);
  }
  return version;
}
