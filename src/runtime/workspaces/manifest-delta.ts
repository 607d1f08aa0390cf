/**
 * A checkpoint manifest stored as its changes from a whole one: an incremental checkpoint of 10,000 files then
 * writes (and hashes, and fsyncs) a few entries instead of megabytes of JSON. The base is always a whole manifest,
 * so a load reads two files at most; past a share of the tree the changes are not worth it and the manifest is
 * stored whole again.
 */
import type { TreeEntry, TreeManifest } from '../../providers/file-host.ts';
import { comparePaths } from '../../providers/tree-diff.ts';

/** Changes past this share of the entries: stored whole (a new base for the next ones). */
const MAX_CHANGED_SHARE = 1 / 8;

export interface ManifestDelta {
  version: 1;
  /** The checkpoint id of the whole manifest the changes apply to. */
  base: string;
  /** Entries added or different from the base's, sorted by path. */
  set: TreeEntry[];
  /** Paths of the base that are gone, sorted. */
  removed: string[];
  files: number;
  bytes: number;
  skipped: number;
}

export const isDelta = (stored: TreeManifest | ManifestDelta): stored is ManifestDelta => 'base' in stored;

/** Equal as stored: everything an entry records, its capture hint and blob location too. */
const sameEntry = (a: TreeEntry, b: TreeEntry): boolean =>
  a === b ||
  (a.type === b.type && a.mode === b.mode && a.size === b.size && a.hash === b.hash && a.target === b.target && a.stat === b.stat && a.blob?.pack === b.blob?.pack && a.blob?.offset === b.blob?.offset);

/**
 * `next` as changes from the whole manifest `base` (id `baseId`), or undefined when too much changed or either
 * tree is not in path order (the merge below relies on it).
 */
export function deltaOf(baseId: string, base: TreeManifest, next: TreeManifest): ManifestDelta | undefined {
  const budget = Math.floor(Math.max(base.entries.length, next.entries.length) * MAX_CHANGED_SHARE);
  const set: TreeEntry[] = [];
  const removed: string[] = [];
  const [from, to] = [base.entries, next.entries];
  for (let i = 0, j = 0; i < from.length || j < to.length; ) {
    const [b, n] = [from[i], to[j]];
    if ((b && i > 0 && comparePaths(from[i - 1]!.path, b.path) >= 0) || (n && j > 0 && comparePaths(to[j - 1]!.path, n.path) >= 0)) return undefined;
    const order = !b ? 1 : !n ? -1 : comparePaths(b.path, n.path);
    if (order < 0) removed.push(from[i++]!.path);
    else if (order > 0) set.push(to[j++]!);
    else {
      if (!sameEntry(b!, n!)) set.push(n!);
      i++;
      j++;
    }
    if (set.length + removed.length > budget) return undefined;
  }
  return { version: 1, base: baseId, set, removed, files: next.files, bytes: next.bytes, skipped: next.skipped };
}

/** The manifest `delta` describes, made from its whole base (unchanged entries are the base's own objects). */
export function applyDelta(base: TreeManifest, delta: ManifestDelta): TreeManifest {
  const removed = new Set(delta.removed);
  const { set } = delta;
  const entries: TreeEntry[] = [];
  let j = 0;
  for (const entry of base.entries) {
    while (j < set.length && comparePaths(set[j]!.path, entry.path) < 0) entries.push(set[j++]!);
    if (j < set.length && set[j]!.path === entry.path) entries.push(set[j++]!);
    else if (!removed.has(entry.path)) entries.push(entry);
  }
  while (j < set.length) entries.push(set[j++]!);
  return { version: 1, entries, files: delta.files, bytes: delta.bytes, skipped: delta.skipped };
}
