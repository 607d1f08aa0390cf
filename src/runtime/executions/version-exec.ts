/**
 * What an execution that reads a content version gets (seed 001 §6): the version directory mounted read-only at
 * `/env/<slug>` (enforced: a read-only bind, which refuses writes even for root), PATH starting with its
 * `.venv/bin` and `node_modules/.bin`, PYTHONPATH and NODE_PATH starting with it, PROJECT_ROOT naming it. How the
 * version reaches the command is its provider's (`contentBinding`, `versionedCommand`): per command, or bound when
 * the allocation is made (`allocationContent`, carried by the allocation intent) and then read for the allocation's
 * life.
 *
 * The version directory is immutable, so an execution keeps reading the version it started with even when another
 * is activated meanwhile; the next execution reads the new one.
 */
import { existsSync } from 'node:fs';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import { EnvironmentContent } from '../../content/environment-content.ts';
import type { ReadOnlyMount, VersionedCommand, WorkspaceView } from '../../providers/provider.ts';
import type { Services } from '../services.ts';

/**
 * What an allocation whose provider binds content at allocation is made with (the intent's `contentVersion` and
 * `mounts`): the environment's active version, bound read-only at /env/<slug>. Nothing where versions are mounted
 * per command, with the chapter off, or before any version is active.
 */
export async function allocationContent(
  services: Services,
  environmentId: string,
  profile: Profile,
): Promise<{ contentVersion?: number; mounts?: ReadOnlyMount[] }> {
  const { content } = services;
  if (!content || services.providers.get(profile.provider).contentBinding !== 'allocation') return {};
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

/** The command, variables and mounts of an execution that reads `version`, as its provider composes them. */
export async function versionedExec(
  services: Services,
  p: { target: { environmentId: string }; version: number; command: string[]; cwd?: string },
  profile: Profile,
  env: Record<string, string>,
  workspace?: WorkspaceView,
): Promise<VersionedCommand> {
  const version = await versionMount(services, p.target.environmentId, p.version);
  return services.providers.get(profile.provider).versionedCommand({
    command: p.command,
    ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
    env,
    profile,
    version,
    hidden: [services.content!.dataDir],
    ...(workspace ? { workspace } : {}),
  });
}
