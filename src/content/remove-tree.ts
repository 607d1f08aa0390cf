/**
 * Removal of a directory tree Berth owns, whatever its depth and whatever permission bits Berth gave it (a version is
 * read-only). A tree can lie deeper than PATH_MAX: one left by an older Berth, or made by a build's own commands with
 * relative paths. A recursive rm that joins absolute paths fails there with ENAMETOOLONG, so such a tree is first
 * taken apart from the top: each directory that lies too deep is moved up to sit directly under the tree's root, so
 * no path this module hands the kernel is longer than HOIST_AT_BYTES plus one name.
 */
import { randomUUID } from 'node:crypto';
import { chmod, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/** Directories whose path is longer than this are moved up before anything below them is touched. */
const HOIST_AT_BYTES = 2048;
/** What the plain recursive rm fails with that taking the tree apart can get past. */
const TAKE_APART_ON = new Set(['ENAMETOOLONG', 'EACCES', 'EPERM']);

/** Remove `dir` and everything under it; a missing `dir` is fine. Links are removed, never followed. */
export async function removeTree(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
    return;
  } catch (e) {
    if (!TAKE_APART_ON.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
  }
  await takeApart(dir);
  await rm(dir, { recursive: true, force: true });
}

/**
 * Give every directory under `top` its owner's write bit back (rm needs it in a read-only tree; root does not) and
 * move each one deeper than HOIST_AT_BYTES to `top/.deep-<uuid>`, where it is then looked at in turn.
 */
async function takeApart(top: string): Promise<void> {
  const pending = [top];
  while (pending.length > 0) {
    const dir = pending.pop()!;
    let entries;
    try {
      await chmod(dir, 0o700);
      entries = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw e;
    }
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      const child = path.join(dir, entry.name);
      if (Buffer.byteLength(child) <= HOIST_AT_BYTES) {
        pending.push(child);
        continue;
      }
      const hoisted = path.join(top, `.deep-${randomUUID()}`);
      await chmod(child, 0o700); // moving a directory to another parent rewrites its `..`: it must be writable
      await rename(child, hoisted);
      pending.push(hoisted);
    }
  }
}
