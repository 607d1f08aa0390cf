/**
 * The content version of a claimed pooled container (docker-pooling.ts). A running container cannot gain the
 * version's read-only bind, so a pool member is made with a content volume of its own, read-only at /env and empty
 * until a claim; the claim fills it, on this host, with the version's tree. Given a `contentDir` beside the versions
 * (Berth's data directory), the volume is a bind of a directory there, and the fill hard-links every file: a volume
 * of the engine's own lives under its data root, which the engine keeps as a mount of its own, so a link into it
 * fails (EXDEV) and every file would be copied, byte for byte, on every claim.
 */
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { access, chmod, copyFile, link, lstat, mkdir, readdir, readlink, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import type { AllocationRef, ReadOnlyMount } from '../provider.ts';
import type { ResourceNames } from './container-spec.ts';
import { engineStatus } from './docker-client.ts';
import { LABEL, type Labels } from './labels.ts';

/** Where a content version is seen: /env/<slug>, as a cold container's bind shows it. */
export const CONTENT_ROOT = '/env';

/** Where Berth keeps pool members' content volumes: in its data directory, beside the versions they link to. */
export const poolContentDir = (dataDir: string): string => path.join(dataDir, 'pool-content');

/** The host directory a member's content volume binds, when the provider has a `contentDir`. */
export const contentBindDir = (contentDir: string, names: ResourceNames): string => path.join(contentDir, names.content);

/** The member's content volume: the engine's own, or (`bindDir`) the local driver's bind of that host directory. */
export const contentVolumeSpec = (names: ResourceNames, labels: Labels, bindDir?: string): Docker.VolumeCreateOptions => ({
  Name: names.content,
  Driver: 'local',
  Labels: labels,
  ...(bindDir ? { DriverOpts: { type: 'none', o: 'bind', device: bindDir } } : {}),
});

/** Read-only to everything in the container, root included; NoCopy: nothing of the image's /env shows through. */
export const contentVolumeMount = (names: ResourceNames) => ({
  Type: 'volume' as const,
  Source: names.content,
  Target: CONTENT_ROOT,
  ReadOnly: true,
  // The engine's API takes NoCopy alone; the typings want every field of a volume created by the mount.
  VolumeOptions: { NoCopy: true } as Docker.MountSettings['VolumeOptions'],
});

/**
 * The host path to fill the allocation's content volume through: undefined when it has none (made before pools held
 * one), when it is not this allocation's, or when this host cannot write it (a remote engine). A bind volume is
 * filled through the directory it binds (on the versions' mount, so links work), and only when that directory is
 * the one this provider made for it.
 */
export async function contentVolumePath(docker: Docker, names: ResourceNames, ref: AllocationRef, contentDir?: string): Promise<string | undefined> {
  let info: Docker.VolumeInspectInfo;
  try {
    info = await docker.getVolume(names.content).inspect();
  } catch (error) {
    if (engineStatus(error) === 404) return undefined;
    throw error;
  }
  const labels = info.Labels ?? {};
  // Its environment label keeps naming the pool that made it: the claim is Berth's record, not a label.
  if (labels[LABEL.managed] !== 'true' || labels[LABEL.requestId] !== ref.requestId || labels[LABEL.allocationId] !== ref.allocationId) return undefined;
  const device = info.Options?.device;
  if (device !== undefined && (!contentDir || device !== contentBindDir(contentDir, names))) return undefined;
  const root = device ?? info.Mountpoint;
  try {
    await access(root, constants.W_OK);
  } catch {
    return undefined;
  }
  return root;
}

/**
 * Fills the content volume at `root` with exactly `version`'s tree, under the name it has below /env, replacing
 * whatever an earlier, interrupted fill left (the volume holds one version). Files are hardlinked where the
 * filesystem allows (versions are immutable, and the volume is read-only in the container), else copied; links are
 * made again as links, never followed, so a link pointing out of the version resolves inside the container, as it
 * does through a cold bind; sockets, fifos and devices are no content and are left out.
 */
export async function fillContent(root: string, version: ReadOnlyMount): Promise<void> {
  const name = path.posix.relative(CONTENT_ROOT, version.target);
  if (!name || name.includes('/') || name.startsWith('.')) {
    throw new BerthError('internal', `A content version is seen at ${CONTENT_ROOT}/<slug>, not ${version.target}.`, { target: version.target });
  }
  for (const entry of await readdir(root)) await rm(path.join(root, entry), { recursive: true, force: true });
  if (!(await lstat(version.source)).isDirectory()) throw new BerthError('internal', 'The version is not a directory.', { source: version.source });
  const partial = path.join(root, `.partial-${randomUUID()}`);
  await copyTree(version.source, partial);
  await rename(partial, path.join(root, name));
}

async function copyTree(from: string, to: string): Promise<void> {
  const mode = (await lstat(from)).mode & 0o7777;
  await mkdir(to, { mode: 0o700 });
  const entries = await readdir(from, { withFileTypes: true });
  await Promise.all(
    entries.map(async (entry) => {
      const [src, dst] = [path.join(from, entry.name), path.join(to, entry.name)];
      if (entry.isDirectory()) return copyTree(src, dst);
      if (entry.isSymbolicLink()) return symlink(await readlink(src), dst);
      if (entry.isFile()) return linkOrCopy(src, dst);
    }),
  );
  // Last: a read-only version's directories (0555) would refuse their own entries to a writer that is not root.
  await chmod(to, mode);
}

async function linkOrCopy(src: string, dst: string): Promise<void> {
  try {
    await link(src, dst);
  } catch (e) {
    // Another filesystem, a link count at its limit, or protected_hardlinks refusing a file this process does not own.
    if (!['EXDEV', 'EMLINK', 'EPERM'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
    await copyFile(src, dst, constants.COPYFILE_FICLONE);
    await chmod(dst, (await lstat(src)).mode & 0o7777);
  }
}
