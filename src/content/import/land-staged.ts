/**
 * Puts a fully staged import in place. Nothing reaches the source until staging succeeded, so a refused import writes
 * nothing. `replace` swaps the whole tree with two renames (the old one moved aside first, so crash recovery can put
 * it back: content-layout.ts). A merge lays the staged tree over the source, each path by one rename (a file replaces
 * a file atomically; a staged file or directory wins over whatever the source had at that path); a crash in the middle
 * of a merge leaves some paths merged, never a partial file.
 */
import { randomUUID } from 'node:crypto';
import { lstat, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { REPLACED_PREFIX, type ContentLayout } from '../content-layout.ts';
import { withContentLock } from '../content-lock.ts';
import { removeTree } from '../remove-tree.ts';

/**
 * The directory to land from `staged`: the staged directory itself, or, when `stripWrapper` and it holds exactly one
 * entry that is a directory (the shape of a repository archive), that directory.
 */
export async function contentRootOf(staged: string, stripWrapper: boolean): Promise<{ dir: string; strippedPrefix?: string }> {
  if (!stripWrapper) return { dir: staged };
  const entries = await readdir(staged, { withFileTypes: true });
  if (entries.length === 1 && entries[0].isDirectory()) return { dir: path.join(staged, entries[0].name), strippedPrefix: entries[0].name };
  return { dir: staged };
}

export async function landStaged(layout: ContentLayout, contentRoot: string, replace: boolean): Promise<void> {
  const replaced = path.join(layout.staging, `${REPLACED_PREFIX}${Date.now()}-${randomUUID()}`);
  let movedAside = false;
  await withContentLock(layout.root, async () => {
    const existing = await kindAt(layout.source);
    if (existing && replace) {
      await rename(layout.source, replaced);
      movedAside = true;
    }
    if (!existing || replace) await rename(contentRoot, layout.source);
    else await mergeInto(contentRoot, layout.source);
  });
  if (movedAside) await removeTree(replaced);
}

async function mergeInto(from: string, to: string): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    const there = await kindAt(dst);
    if (entry.isDirectory() && there === 'directory') {
      await mergeInto(src, dst);
      continue;
    }
    // rename() never follows a link at `dst`; a directory in the way of a file (or the reverse) goes first.
    if (there === 'directory' || (there && entry.isDirectory())) await removeTree(dst);
    await rename(src, dst);
  }
}

async function kindAt(p: string): Promise<'directory' | 'other' | null> {
  try {
    return (await lstat(p)).isDirectory() ? 'directory' : 'other';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}
