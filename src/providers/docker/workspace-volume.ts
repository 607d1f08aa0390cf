/**
 * An allocation's workspace view on a Docker engine: its staging volume (workspaceVolumeSpec), made with the
 * container and found again only when it carries this allocation's labels, and the file host the runtime fills and
 * captures it through, straight in the volume's tmpfs as the engine mounts it on this host.
 */
import { access, constants, stat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import { DirectoryFileHost } from '../directory-file-host.ts';
import type { BlobSource, CaptureLimits, FileHost, PackWriter, TreeManifest } from '../file-host.ts';
import type { AllocationRef } from '../provider.ts';
import { COMMAND_UID, type ResourceNames, workspaceVolumeSpec } from './container-spec.ts';
import { describeError, engineStatus } from './docker-client.ts';
import { LABEL, type Labels } from './labels.ts';

/** statfs(2) f_type of a tmpfs. */
const TMPFS_MAGIC = 0x01021994;

type Identity = Pick<AllocationRef, 'requestId' | 'allocationId' | 'environmentId'>;

const ownedByAllocation = (labels: Labels | null | undefined, who: Identity): boolean =>
  labels?.[LABEL.managed] === 'true' &&
  labels[LABEL.requestId] === who.requestId &&
  labels[LABEL.allocationId] === who.allocationId &&
  labels[LABEL.environmentId] === who.environmentId;

/**
 * Creates the staging volume, or finds it again (a resumed or adopted allocation). The engine answers a create of an
 * existing name with that volume whoever made it, so it is looked at: false when it is not this allocation's.
 */
export async function ensureWorkspaceVolume(docker: Docker, names: ResourceNames, labels: Labels, profile: Profile): Promise<boolean> {
  await docker.createVolume(workspaceVolumeSpec(names, labels, profile));
  const info = await docker.getVolume(names.workspace).inspect();
  return ownedByAllocation(info.Labels, {
    requestId: labels[LABEL.requestId],
    allocationId: labels[LABEL.allocationId],
    environmentId: labels[LABEL.environmentId],
  });
}

/**
 * The file host of the allocation's view: the volume named after its request, if it carries the allocation's
 * labels and its tmpfs is mounted at its mountpoint on this host. A remote engine's volumes are out of reach: their
 * file host would go through the engine's archive API, which Berth does not have yet.
 */
export async function workspaceFileHost(docker: Docker, volume: string, ref: AllocationRef): Promise<FileHost> {
  const detail = { requestId: ref.requestId, allocationId: ref.allocationId, volume };
  let info: Docker.VolumeInspectInfo;
  try {
    info = await docker.getVolume(volume).inspect();
  } catch (error) {
    if (engineStatus(error) === 404) throw new BerthError('unavailable', 'The allocation has no workspace volume.', { ...detail, reason: 'volume_missing' });
    throw new BerthError('unavailable', `Docker engine: ${describeError(error)}`, detail);
  }
  if (!ownedByAllocation(info.Labels, ref)) {
    throw new BerthError('unavailable', 'The volume under this allocation\'s name is not its workspace volume.', { ...detail, reason: 'not_this_allocation' });
  }
  try {
    await access(info.Mountpoint, constants.R_OK | constants.W_OK);
  } catch {
    throw new BerthError('workspace_unavailable', 'The allocation\'s workspace volume cannot be reached from this host (a remote engine, or a server without access to its data root).', {
      ...detail,
      reason: 'remote_engine',
    });
  }
  await assertMounted(info.Mountpoint, detail);
  return new MountedVolumeFileHost(info.Mountpoint, detail);
}

/**
 * The volume's tmpfs is mounted at its mountpoint only while a container uses it; otherwise the mountpoint is a
 * plain directory on the engine's disk, and what is written there would be unbounded and hidden from the container.
 */
async function assertMounted(mountpoint: string, detail: Record<string, unknown>): Promise<void> {
  const [fs, self, parent] = await Promise.all([statfs(mountpoint), stat(mountpoint), stat(dirname(mountpoint))]);
  if (fs.type !== TMPFS_MAGIC || self.dev === parent.dev) {
    throw new BerthError('unavailable', 'The allocation\'s workspace volume is not mounted (its container does not run).', { ...detail, reason: 'not_mounted' });
  }
}

/** A DirectoryFileHost over the volume that looks again before each call that the tmpfs is still the one mounted there. */
class MountedVolumeFileHost implements FileHost {
  private readonly files: DirectoryFileHost;

  constructor(
    private readonly mountpoint: string,
    private readonly detail: Record<string, unknown>,
  ) {
    this.files = new DirectoryFileHost(mountpoint, { uid: COMMAND_UID, gid: COMMAND_UID });
  }

  async capture(previous: TreeManifest | undefined, pack: PackWriter, limits: CaptureLimits): Promise<TreeManifest> {
    await assertMounted(this.mountpoint, this.detail);
    return this.files.capture(previous, pack, limits);
  }

  async apply(target: TreeManifest, base: TreeManifest | undefined, source: BlobSource): Promise<void> {
    await assertMounted(this.mountpoint, this.detail);
    return this.files.apply(target, base, source);
  }
}
