/**
 * The differences between two checkpoint trees, path by path: what a checkpoint diff shows and what an apply must do.
 * Pure; the capture hints (stat) and where the bytes are stored (blob) are not content and never make a difference.
 */
import type { TreeEntry, TreeManifest } from './file-host.ts';

/** What a path is on one side of a change. */
export interface EntryState {
  type: TreeEntry['type'];
  mode: number;
  size: number;
  hash?: string;
  target?: string;
}

export interface TreeChange {
  path: string;
  /** The type after the change, or before it when the path is removed. */
  type: TreeEntry['type'];
  before: EntryState | null;
  after: EntryState | null;
}

/** The one order of manifest paths (UTF-16 code units, as capture sorts them): a parent always precedes its children. */
export const comparePaths = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

const stateOf = (entry: TreeEntry): EntryState => {
  const state: EntryState = { type: entry.type, mode: entry.mode, size: entry.size };
  if (entry.hash !== undefined) state.hash = entry.hash;
  if (entry.target !== undefined) state.target = entry.target;
  return state;
};

const sameContent = (a: TreeEntry, b: TreeEntry): boolean =>
  a.type === b.type && a.mode === b.mode && a.size === b.size && a.hash === b.hash && a.target === b.target;

const sorted = (entries: TreeEntry[]): TreeEntry[] => {
  for (let i = 1; i < entries.length; i++) {
    if (comparePaths(entries[i - 1]!.path, entries[i]!.path) >= 0) return [...entries].sort((x, y) => comparePaths(x.path, y.path));
  }
  return entries;
};

/** The changes from `a` to `b` (either may be undefined: an empty tree), sorted by path. */
export function diffTrees(a: TreeManifest | undefined, b: TreeManifest | undefined): TreeChange[] {
  const left = sorted(a?.entries ?? []);
  const right = sorted(b?.entries ?? []);
  const changes: TreeChange[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    const before = left[i];
    const after = right[j];
    const order = before === undefined ? 1 : after === undefined ? -1 : comparePaths(before.path, after.path);
    if (order < 0) {
      changes.push({ path: before!.path, type: before!.type, before: stateOf(before!), after: null });
      i++;
    } else if (order > 0) {
      changes.push({ path: after!.path, type: after!.type, before: null, after: stateOf(after!) });
      j++;
    } else {
      if (!sameContent(before!, after!)) changes.push({ path: after!.path, type: after!.type, before: stateOf(before!), after: stateOf(after!) });
      i++;
      j++;
    }
  }
  return changes;
}
