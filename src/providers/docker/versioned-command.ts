/**
 * A command reading the content version its container was made with (bound read-only at /env/<slug>): the version's
 * variables are set inside the container, in front of the container's own (its image's PATH), by a POSIX sh wrapper
 * that then execs the command in place (same pid). Any image with a /bin/sh will do.
 */
import { DEFAULT_PATH } from '../command-env.ts';
import type { VersionedCommand, VersionedCommandSpec } from '../provider.ts';

const IN_CONTAINER = [
  '/bin/sh',
  '-c',
  [
    `PATH="$PROJECT_ROOT/.venv/bin:$PROJECT_ROOT/node_modules/.bin:\${PATH:-${DEFAULT_PATH}}"`,
    'PYTHONPATH="$PROJECT_ROOT${PYTHONPATH:+:$PYTHONPATH}"',
    'NODE_PATH="$PROJECT_ROOT/node_modules${NODE_PATH:+:$NODE_PATH}"',
    'export PATH PYTHONPATH NODE_PATH',
    'exec "$@"',
  ].join('; '),
  'berth-env',
];

export function versionedInContainer(spec: VersionedCommandSpec): VersionedCommand {
  return { command: [...IN_CONTAINER, ...spec.command], env: { ...spec.env, PROJECT_ROOT: spec.version.target } };
}
