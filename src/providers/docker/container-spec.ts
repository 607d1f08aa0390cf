/**
 * The container, network and volumes an allocation is made of (DESIGN §6): read-only root, bounded /tmp, memory,
 * CPU and pids limits, no capabilities, no-new-privileges, UID 1000, a reaping PID 1, a per-allocation volume
 * at /berth/spool for the executor's spool and receipts, the content version bound read-only at /env/<slug>, the
 * command's HOME: a tmpfs of the profile's size that UID 1000 owns and may run files from, and the workspace view
 * at /workspace: a staging volume of the profile's size, a tmpfs that UID 1000 owns.
 * A build's one-off container shares the same hardening.
 */
import type Docker from 'dockerode';
import { DEFAULT_HOME_MB, DEFAULT_WORKSPACE_MB, type Profile } from '../../../schemas/profile.ts';
import { type AllocationIntent, WORKSPACE_TARGET } from '../provider.ts';
import type { Labels } from './labels.ts';

export const DEFAULT_IMAGE = 'berth-base:latest';
export const SPOOL_PATH = '/berth/spool';
export const COMMAND_UID = 1000;
export const COMMAND_USER = `${COMMAND_UID}:${COMMAND_UID}`;
/** Not the image's: its passwd may name a home on the read-only root, or none. */
export const HOME_PATH = '/home/berth';

const DEFAULT_MEMORY_MB = 512;
const DEFAULT_PIDS_LIMIT = 256;
/** A build's /tmp holds HOME and the npm/pip caches; it counts against the memory limit like any tmpfs. */
const BUILD_TMP_SIZE = '512m';

/**
 * Keeps the container alive with nothing but a POSIX sh, so any image with /bin/sh works. PID 1 is the engine's
 * docker-init (tini), which reaps orphans of exec'd commands; the loop's `wait` lets TERM end it at once.
 */
const KEEPALIVE = ['/bin/sh', '-c', 'trap "exit 0" TERM; while :; do sleep 3600 & wait; done'];

export interface ResourceNames {
  container: string;
  network: string;
  volume: string;
  workspace: string;
  /** A pooled container's content volume (pool-content.ts), made only for pool members. */
  content: string;
}

export function containerSpec(
  intent: AllocationIntent,
  names: ResourceNames,
  labels: Labels,
  defaultImage: string = DEFAULT_IMAGE,
  /** More of the allocation's own volumes (a pooled container's content volume). */
  volumes: Docker.MountSettings[] = [],
): Docker.ContainerCreateOptions {
  const { profile } = intent;
  // The content version is bound read-only: writes fail with EROFS even for root (seed 001 §6).
  const content = (intent.mounts ?? []).map((m) => ({ Type: 'bind' as const, Source: m.source, Target: m.target, ReadOnly: true }));
  const host = hardenedHostConfig(profile, names.network, [
    { Type: 'volume', Source: names.volume, Target: SPOOL_PATH, ReadOnly: false },
    { Type: 'volume', Source: names.workspace, Target: WORKSPACE_TARGET, ReadOnly: false },
    ...content,
    ...volumes,
  ]);
  return {
    name: names.container,
    Image: profile.image ?? defaultImage,
    Cmd: KEEPALIVE,
    Entrypoint: [],
    User: COMMAND_USER,
    // Every exec inherits it (a caller's own HOME still wins).
    Env: [`HOME=${HOME_PATH}`],
    Labels: labels,
    Hostname: 'berth',
    HostConfig: { ...host, Tmpfs: { ...host.Tmpfs, [HOME_PATH]: homeTmpfs(profile) } },
  };
}

/**
 * HOME's mount options: owned by the command user and private to it, executable (scripts, `pip install --user`,
 * `./configure`; the engine makes tmpfs noexec unless told), never setuid or device files, bounded by the profile.
 */
const homeTmpfs = (profile: Profile): string =>
  `rw,exec,nosuid,nodev,size=${profile.homeMb ?? DEFAULT_HOME_MB}m,mode=0700,uid=${COMMAND_UID},gid=${COMMAND_UID}`;

/**
 * What every container Berth runs shares, allocations and builds alike: read-only root, a bounded private /tmp,
 * memory (no swap on top), CPU and pids limits, no capabilities, no-new-privileges, never restarted, and either no
 * network or its own bridge `network`.
 */
export function hardenedHostConfig(
  profile: Profile,
  network: string,
  mounts: Docker.MountConfig,
  tmpSize = '64m',
): Docker.HostConfig {
  const memory = (profile.memoryMb ?? DEFAULT_MEMORY_MB) * 1024 * 1024;
  return {
    Init: true,
    ReadonlyRootfs: true,
    Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${tmpSize},mode=1777` },
    Memory: memory,
    // Equal to Memory: no swap on top of the limit.
    MemorySwap: memory,
    NanoCpus: profile.cpus === undefined ? undefined : Math.round(profile.cpus * 1e9),
    PidsLimit: profile.pidsLimit ?? DEFAULT_PIDS_LIMIT,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    NetworkMode: profile.network === 'none' ? 'none' : network,
    Mounts: mounts,
    RestartPolicy: { Name: 'no' },
  };
}

/**
 * A one-off build container (build-container.ts): the allocation's hardening, `binds` WRITABLE (the version being
 * built, at /env/<slug>) and nothing else of the host; a larger /tmp, since it is HOME and the package caches.
 */
export function buildContainerSpec(
  profile: Profile,
  names: Pick<ResourceNames, 'container' | 'network'>,
  labels: Labels,
  binds: Array<{ source: string; target: string }>,
  defaultImage: string = DEFAULT_IMAGE,
): Docker.ContainerCreateOptions {
  const mounts = binds.map((b) => ({ Type: 'bind' as const, Source: b.source, Target: b.target, ReadOnly: false }));
  return {
    name: names.container,
    Image: profile.image ?? defaultImage,
    Cmd: KEEPALIVE,
    Entrypoint: [],
    User: COMMAND_USER,
    Labels: labels,
    Hostname: 'berth-build',
    HostConfig: hardenedHostConfig(profile, names.network, mounts, BUILD_TMP_SIZE),
  };
}

export const networkSpec = (names: ResourceNames, labels: Labels): Docker.NetworkCreateOptions => ({
  Name: names.network,
  Driver: 'bridge',
  CheckDuplicate: true,
  Labels: labels,
});

export const volumeSpec = (names: ResourceNames, labels: Labels): Docker.VolumeCreateOptions => ({
  Name: names.volume,
  Driver: 'local',
  Labels: labels,
});

/**
 * The workspace view's staging volume: a tmpfs the engine mounts while the container runs (so the profile's size is
 * a hard bound and a command cannot fill the engine's disk), owned by the command user. Its pages count like any
 * tmpfs: in the memory of whoever writes them.
 */
export const workspaceVolumeSpec = (names: ResourceNames, labels: Labels, profile: Profile): Docker.VolumeCreateOptions => ({
  Name: names.workspace,
  Driver: 'local',
  DriverOpts: {
    type: 'tmpfs',
    device: 'tmpfs',
    // nosuid, nodev: the tmpfs is mounted on the engine's host too, at the volume's mountpoint.
    o: `nosuid,nodev,size=${profile.workspaceMb ?? DEFAULT_WORKSPACE_MB}m,uid=${COMMAND_UID},gid=${COMMAND_UID},mode=0755`,
  },
  Labels: labels,
});
