/**
 * What an execution that reads a content version gets (seed 001 §6): the version directory mounted read-only at
 * `/env/<slug>` (enforced: a read-only bind, which refuses writes even for root), PATH starting with its
 * `.venv/bin` and `node_modules/.bin`, PYTHONPATH and NODE_PATH starting with it, PROJECT_ROOT naming it.
 *
 * native, contained profile: the executor's own bubblewrap gets the mount (ExecSpec.mounts).
 * native, uncontained profile: the command is wrapped in bubblewrap that keeps the host as writable as it was, with
 *   the version bound read-only and Berth's data directory hidden (so the version cannot be written by its host path
 *   either). Without bubblewrap such executions are refused (unavailable): a mount that is only described is not one.
 * docker: a running container cannot gain a mount, so the allocation binds the active version read-only when its
 *   container is made (`allocationContent`, carried by the allocation intent); the execution reads the version its
 *   allocation binds, and its variables are set inside the container, in front of the container's own (its image's
 *   PATH), by a POSIX sh wrapper that then execs the command.
 *
 * The version directory is immutable, so an execution keeps reading the version it started with even when another
 * is activated meanwhile; the next execution reads the new one.
 */
import { existsSync } from 'node:fs';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import { EnvironmentContent } from '../../content/environment-content.ts';
import { DEFAULT_PATH } from '../../providers/command-env.ts';
import { bubblewrapArgv, findBubblewrap } from '../../providers/native/bubblewrap.ts';
import type { ReadOnlyMount } from '../../providers/provider.ts';
import type { Services } from '../services.ts';

export interface VersionedExec {
  command: string[];
  env: Record<string, string>;
  mounts?: ReadOnlyMount[];
}

const prepend = (first: string, rest: string | undefined): string => (rest ? `${first}:${rest}` : first);

/** The variables a session of the version at `mount` runs with, over `env`. */
export function versionEnv(env: Record<string, string>, mount: string): Record<string, string> {
  return {
    ...env,
    PATH: prepend(`${mount}/.venv/bin:${mount}/node_modules/.bin`, env.PATH ?? DEFAULT_PATH),
    PYTHONPATH: prepend(mount, env.PYTHONPATH),
    NODE_PATH: prepend(`${mount}/node_modules`, env.NODE_PATH),
    PROJECT_ROOT: mount,
  };
}

/**
 * versionEnv inside a container, over the variables the command would have had (the image's, or the caller's):
 * `sh -c WRAPPER berth-env <command…>` sets them from PROJECT_ROOT and execs the command in place (same pid).
 */
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

/**
 * What a Docker allocation is made with (the allocation intent's `contentVersion` and `mounts`): the environment's
 * active version, bound read-only at /env/<slug>. Nothing for native allocations (they take mounts per command),
 * with the chapter off, or before any version is active.
 */
export async function allocationContent(
  services: Services,
  environmentId: string,
  profile: Profile,
): Promise<{ contentVersion?: number; mounts?: ReadOnlyMount[] }> {
  const { content } = services;
  if (profile.provider !== 'docker' || !content) return {};
  const environment = await content.environment(environmentId);
  if (!environment || environment.activeVersion === null) return {};
  const version = environment.activeVersion;
  const source = EnvironmentContent.of(content.dataDir, environmentId).versionDir(version);
  return { contentVersion: version, mounts: [{ source, target: `/env/${environment.slug}` }] };
}

/** Where an execution of the environment sees `version`: its directory, read-only at /env/<slug>. */
export async function versionMount(services: Services, environmentId: string, version: number): Promise<ReadOnlyMount> {
  const { content } = services;
  const notReady = (message: string) => new BerthError('environment_not_ready', message, { environmentId, version });
  if (!content) throw notReady('The environments content chapter is switched off; this execution names a version.');
  const environment = await content.environment(environmentId);
  if (!environment) throw new BerthError('environment_not_found', 'No such environment.', { environmentId });
  const source = EnvironmentContent.of(content.dataDir, environmentId).versionDir(version);
  if (!existsSync(source)) throw notReady(`Version ${version} is not on disk any more.`);
  return { source, target: `/env/${environment.slug}` };
}

export async function versionedExec(
  services: Services,
  p: { target: { environmentId: string }; version: number; command: string[]; cwd?: string },
  profile: Profile,
  env: Record<string, string>,
): Promise<VersionedExec> {
  const environmentId = p.target.environmentId;
  const mounts = [await versionMount(services, environmentId, p.version)];
  const mount = mounts[0].target;
  if (profile.provider === 'docker') return { command: [...IN_CONTAINER, ...p.command], env: { ...env, PROJECT_ROOT: mount } };
  if (profile.contain) return { command: p.command, env: versionEnv(env, mount), mounts };
  const bwrap = findBubblewrap();
  if (!bwrap) throw new BerthError('unavailable', `Mounting ${mount} read-only needs bubblewrap (bwrap), which is not installed.`, { environmentId });
  const chdir = p.cwd ?? env.HOME ?? '/';
  const wrap = bubblewrapArgv(bwrap, { hostWritable: true, mounts, hidden: [services.content!.dataDir], chdir });
  return { command: [...wrap, ...p.command], env: versionEnv(env, mount) };
}
