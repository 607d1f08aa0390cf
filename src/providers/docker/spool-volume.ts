/**
 * What goes into an allocation's spool volume before its container starts: `ops/` owned by UID 1000, where
 * commands' spools and receipts live, and Berth's own supervisor, root-owned and read-only, so any image with a
 * /bin/sh can run commands. The engine creates the volume owned by root and the container has no capability to
 * chown it, so Berth lays it out itself: directly in the volume's mountpoint when this process can write there (the
 * engine is local and we are root: a few file operations), else through the archive API (allowed into a volume even
 * with a read-only root, but the engine mounts the container for it: about 40 ms). Doing it again is harmless, so a
 * resumed allocation simply does it again. On the host, `ops` is handed over through a descriptor opened without
 * following (the volume's root is root-owned, but a resumed volume is whatever its commands left in `ops`).
 */
import { closeSync, fchownSync } from 'node:fs';
import { access, chmod, chown, constants, copyFile, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { SUPERVISOR_PATH } from '../spool.ts';
import { mkdirAt, openDir, openDirAt } from '../spool-dir.ts';
import { BerthError } from '../../../schemas/errors.ts';
import { COMMAND_UID, SPOOL_PATH } from './container-spec.ts';
import { tarArchive, type TarEntry } from './tar-archive.ts';

export const OPS_DIR = `${SPOOL_PATH}/ops`;
export const SUPERVISOR_IN_CONTAINER = `${SPOOL_PATH}/supervisor.sh`;

export async function spoolEntries(): Promise<TarEntry[]> {
  return [
    { path: 'ops', type: 'directory', mode: 0o755, uid: COMMAND_UID, gid: COMMAND_UID },
    { path: 'supervisor.sh', type: 'file', mode: 0o555, uid: 0, gid: 0, content: await readFile(SUPERVISOR_PATH) },
  ];
}

export async function prepareSpool(docker: Docker, container: Docker.Container, volume: string): Promise<void> {
  const { Mountpoint } = await docker.getVolume(volume).inspect();
  if (!(await layOutOnHost(Mountpoint))) await layOutThroughArchive(container);
}

/** The remote-engine way: one tar with exact owners and modes, extracted by the engine into the volume. */
export async function layOutThroughArchive(container: Docker.Container): Promise<void> {
  await container.putArchive(tarArchive(await spoolEntries()), { path: SPOOL_PATH });
}

async function layOutOnHost(mountpoint: string): Promise<boolean> {
  try {
    await access(mountpoint, constants.W_OK);
  } catch {
    return false;
  }
  const root = openDir(mountpoint);
  if (root === undefined) return false;
  try {
    mkdirAt(root, 'ops');
    const ops = openDirAt(root, 'ops', (kind) => new BerthError('internal', `The spool volume's "ops" is a ${kind}, not a directory.`, { volume: mountpoint }));
    fchownSync(ops!, COMMAND_UID, COMMAND_UID);
    closeSync(ops!);
  } finally {
    closeSync(root);
  }
  // Copied aside, then renamed: a container never sees a half-written supervisor.
  const partial = join(mountpoint, '.supervisor.sh.partial');
  await copyFile(SUPERVISOR_PATH, partial);
  await chown(partial, 0, 0);
  await chmod(partial, 0o555);
  await rename(partial, join(mountpoint, 'supervisor.sh'));
  return true;
}
