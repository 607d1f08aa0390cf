/**
 * A host command reading a content version, mounted per command. A contained command's own bubblewrap gets the
 * mount (ExecSpec.mounts). An uncontained one is wrapped in bubblewrap that keeps the host as writable as it was,
 * with the version bound read-only and Berth's data directory hidden (so the version cannot be written by its host
 * path either) but for the command's workspace; without bubblewrap it is refused (`unavailable`): a mount that is
 * only described is not one.
 */
import { join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { VersionedCommand, VersionedCommandSpec } from '../provider.ts';
import { versionEnv } from '../version-env.ts';
import { bubblewrapArgv, findBubblewrap } from './bubblewrap.ts';
import { workspaceCwd } from '../workspace-view.ts';

export function versionedOnHost(spec: VersionedCommandSpec): VersionedCommand {
  const mount = spec.version.target;
  const mounts = [spec.version];
  if (spec.profile.contain) return { command: spec.command, env: versionEnv(spec.env, mount), mounts };
  const bwrap = findBubblewrap();
  if (!bwrap) throw new BerthError('unavailable', `Mounting ${mount} read-only needs bubblewrap (bwrap), which is not installed.`, { mount });
  const { workspace } = spec;
  // A workspace in the data directory (a managed one) is bound again at its own path after the hiding, writable.
  const binds = workspace ? [{ source: workspace.source, target: workspace.source }] : [];
  const chdir = workspace ? join(workspace.source, workspaceCwd(workspace, spec.cwd)) : (spec.cwd ?? spec.env.HOME ?? '/');
  const wrap = bubblewrapArgv(bwrap, { hostWritable: true, mounts, binds, hidden: spec.hidden, chdir });
  return { command: [...wrap, ...spec.command], env: versionEnv(spec.env, mount) };
}
