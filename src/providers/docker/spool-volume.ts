/**
 * What goes into an allocation's spool volume before its container starts. The engine creates a named volume owned
 * by root, and the container has no capability to chown it, so Berth writes the layout through the archive API
 * (allowed into a volume even with a read-only root): `ops/` owned by UID 1000, where commands' spools and receipts
 * live. Writing it again is harmless, so a resumed allocation simply does it again.
 */
import type Docker from 'dockerode';
import { SPOOL_PATH } from './container-spec.ts';
import { tarArchive, type TarEntry } from './tar-archive.ts';

export const OPS_DIR = `${SPOOL_PATH}/ops`;

const COMMAND_UID = 1000;

export function spoolEntries(): TarEntry[] {
  return [{ path: 'ops', type: 'directory', mode: 0o755, uid: COMMAND_UID, gid: COMMAND_UID }];
}

export async function prepareSpool(container: Docker.Container): Promise<void> {
  await container.putArchive(tarArchive(spoolEntries()), { path: SPOOL_PATH });
}
