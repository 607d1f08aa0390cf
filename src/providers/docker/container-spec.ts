/**
 * The container, network and volume an allocation is made of (DESIGN §6): read-only root, bounded /tmp, memory,
 * CPU and pids limits, no capabilities, no-new-privileges, UID 1000, a reaping PID 1, and a per-allocation volume
 * at /berth/spool for the executor's spool and receipts.
 */
import type Docker from 'dockerode';
import type { AllocationIntent } from '../provider.ts';
import type { Labels } from './labels.ts';

export const DEFAULT_IMAGE = 'berth-base:latest';
export const SPOOL_PATH = '/berth/spool';
export const COMMAND_UID = 1000;
export const COMMAND_USER = `${COMMAND_UID}:${COMMAND_UID}`;

const DEFAULT_MEMORY_MB = 512;
const DEFAULT_PIDS_LIMIT = 256;

/**
 * Keeps the container alive with nothing but a POSIX sh, so any image with /bin/sh works. PID 1 is the engine's
 * docker-init (tini), which reaps orphans of exec'd commands; the loop's `wait` lets TERM end it at once.
 */
const KEEPALIVE = ['/bin/sh', '-c', 'trap "exit 0" TERM; while :; do sleep 3600 & wait; done'];

export interface ResourceNames {
  container: string;
  network: string;
  volume: string;
}

export function containerSpec(
  intent: AllocationIntent,
  names: ResourceNames,
  labels: Labels,
  defaultImage: string = DEFAULT_IMAGE,
): Docker.ContainerCreateOptions {
  const { profile } = intent;
  const memory = (profile.memoryMb ?? DEFAULT_MEMORY_MB) * 1024 * 1024;
  const isolated = profile.network === 'none';
  return {
    name: names.container,
    Image: profile.image ?? defaultImage,
    Cmd: KEEPALIVE,
    Entrypoint: [],
    User: COMMAND_USER,
    Labels: labels,
    Hostname: 'berth',
    HostConfig: {
      Init: true,
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=64m,mode=1777' },
      Memory: memory,
      // Equal to Memory: no swap on top of the limit.
      MemorySwap: memory,
      NanoCpus: profile.cpus === undefined ? undefined : Math.round(profile.cpus * 1e9),
      PidsLimit: profile.pidsLimit ?? DEFAULT_PIDS_LIMIT,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: isolated ? 'none' : names.network,
      Mounts: [{ Type: 'volume', Source: names.volume, Target: SPOOL_PATH, ReadOnly: false }],
      RestartPolicy: { Name: 'no' },
    },
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
