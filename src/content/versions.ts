/**
 * Versions (seed 001 §4): a build snapshots the source into `versions/<n>`, installs into it, and makes it read-only.
 *
 * The snapshot is a copy, not hardlinks (the source stays writable: a hardlinked version would change with it). Each
 * file is copied with copyFile(COPYFILE_FICLONE): a reflink on filesystems that share extents (btrfs, XFS), and a
 * kernel-side copy elsewhere, several files at a time, which is `cp --reflink=auto -a` minus owners and times.
 * Dependency directories (`node_modules`, `.venv`, at any depth) are excluded: what a build installs replaces them.
 * The copy goes to a `.partial-` directory renamed to its number when whole, so a crash never leaves a half version.
 *
 * makeReadOnly sets the permission bits (files 0444, or 0555 when executable; directories 0555). That stops any
 * non-root writer; root ignores permission bits, so sessions get read-only by the way the version is mounted: a
 * read-only bind (bubblewrap --ro-bind, a Docker bind mount with read_only), which refuses writes even for root.
 */
import { randomUUID } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import { chmod, copyFile, lstat, mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { PARTIAL_VERSION_PREFIX, versionDir, type ContentLayout } from './content-layout.ts';
import { withContentLock } from './content-lock.ts';
import { DEPENDENCY_DIRS } from './import/member-policy.ts';
import { removeTree } from './remove-tree.ts';

const COPY_CONCURRENCY = 16;

export interface SnapshotResult {
  dir: string;
  files: number;
}

/** Copy `source` into the new directory `dest` (which must not exist), without dependency directories. */
export async function snapshot(source: string, dest: string): Promise<SnapshotResult> {
  if (existsSync(dest)) throw new BerthError('invalid_state', 'That version directory already exists.', { dir: dest });
  const partial = path.join(path.dirname(dest), `${PARTIAL_VERSION_PREFIX}${path.basename(dest)}-${randomUUID()}`);
  await mkdir(path.dirname(dest), { recursive: true });
  const copies: Array<[string, string]> = [];
  const walk = async (from: string, to: string): Promise<void> => {
    await mkdir(to, ((await lstat(from)).mode & 0o7777) | 0o700);
    const entries = await readdir(from, { withFileTypes: true });
    const subdirs: Promise<void>[] = [];
    for (const entry of entries) {
      const src = path.join(from, entry.name);
      const dst = path.join(to, entry.name);
      if (entry.isDirectory()) {
        if (!DEPENDENCY_DIRS.has(entry.name)) subdirs.push(walk(src, dst));
      } else if (entry.isFile()) copies.push([src, dst]);
    }
    await Promise.all(subdirs);
  };
  try {
    if (existsSync(source)) await walk(source, partial);
    else await mkdir(partial); // an environment with no files yet builds an empty version
    let next = 0;
    const worker = async () => {
      while (next < copies.length) {
        const [src, dst] = copies[next++];
        await copyFile(src, dst, constants.COPYFILE_FICLONE);
      }
    };
    await Promise.all(Array.from({ length: COPY_CONCURRENCY }, worker));
    await rename(partial, dest);
  } catch (e) {
    await removeTree(partial);
    throw e;
  }
  return { dir: dest, files: copies.length };
}

/** Snapshot an environment's source into `versions/<version>`, while no import or write is being published. */
export function snapshotSource(layout: ContentLayout, version: number): Promise<SnapshotResult> {
  return withContentLock(layout.root, () => snapshot(layout.source, versionDir(layout, version)));
}

/** Take write permission away from everything under `dir` (links are left alone: their bits mean nothing). */
export async function makeReadOnly(dir: string): Promise<void> {
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true });
    await Promise.all(
      entries.map(async (entry) => {
        const p = path.join(d, entry.name);
        if (entry.isDirectory()) await walk(p);
        else if (entry.isFile()) await chmod(p, (await lstat(p)).mode & 0o111 ? 0o555 : 0o444);
      }),
    );
    await chmod(d, 0o555);
  };
  await walk(dir);
}

/** The bytes of every file and link under `dir` (apparent sizes, links not followed). */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true });
    await Promise.all(
      entries.map(async (entry) => {
        const p = path.join(d, entry.name);
        if (entry.isDirectory()) return walk(p);
        const { size } = await lstat(p); // read before adding: `total += await …` would add to a stale total
        total += size;
      }),
    );
  };
  await walk(dir);
  return total;
}
