/**
 * A manifest is data (read from the store, or sent by a remote peer): before an apply acts on it, every entry is
 * checked to name a place inside the view that Berth may write, with a well-formed description. A bad one is refused
 * whole with invalid_request (detail.path, detail.reason), before anything is written.
 */
import { BerthError } from '../../schemas/errors.ts';
import { PRIVATE_ROOT_NAMES, type TreeEntry, type TreeManifest } from './file-host.ts';
import { MAX_LINK_TARGET } from './tree-capture.ts';
import { comparePaths } from './tree-diff.ts';

const MAX_PATH_BYTES = 4096;
const MAX_NAME_BYTES = 255;
const HASH = /^sha256:[0-9a-f]{64}$/;
const privateAtRoot = new Set<string>(PRIVATE_ROOT_NAMES);

const refuse = (path: unknown, reason: string): BerthError =>
  new BerthError('invalid_request', 'A checkpoint manifest is malformed or names a place outside the view; nothing was applied.', {
    path: typeof path === 'string' ? path : null,
    reason,
  });

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/**
 * Why the entry's path is not a plain relative path inside the view, or undefined. One pass without allocations
 * (an apply checks every entry of a tree): a UTF-16 length under a third of a bound cannot be over it in UTF-8.
 */
function pathProblem(path: unknown): string | undefined {
  if (typeof path !== 'string' || path === '') return 'empty_path';
  if (path.includes('\0')) return 'nul_byte';
  if (path.charCodeAt(0) === 0x2f) return 'absolute_path';
  if (path.length * 3 > MAX_PATH_BYTES && Buffer.byteLength(path) > MAX_PATH_BYTES) return 'path_too_long';
  for (let start = 0; ; ) {
    const slash = path.indexOf('/', start);
    const end = slash < 0 ? path.length : slash;
    const length = end - start;
    if (length === 0 || (path.charCodeAt(start) === 0x2e && (length === 1 || (length === 2 && path.charCodeAt(start + 1) === 0x2e)))) return 'bad_segment';
    if (length * 3 > MAX_NAME_BYTES && Buffer.byteLength(path.slice(start, end)) > MAX_NAME_BYTES) return 'name_too_long';
    if (start === 0 && privateAtRoot.has(path.slice(0, end))) return 'private_name';
    if (slash < 0) return undefined;
    start = slash + 1;
  }
}

function entryProblem(entry: TreeEntry): string | undefined {
  if (!isCount(entry.mode) || entry.mode > 0o777) return 'bad_mode';
  if (entry.type === 'directory') return undefined;
  if (entry.type === 'symlink') {
    const target = entry.target;
    if (typeof target !== 'string' || target === '' || target.includes('\0') || Buffer.byteLength(target) > MAX_LINK_TARGET) return 'bad_link_target';
    return undefined;
  }
  if (entry.type !== 'file') return 'bad_type';
  if (!isCount(entry.size)) return 'bad_size';
  if (typeof entry.hash !== 'string' || !HASH.test(entry.hash)) return 'bad_hash';
  const blob = entry.blob;
  // The pack is a name the blob source resolves in its own directory: never a path.
  if (!blob || typeof blob.pack !== 'string' || blob.pack === '' || /[/\0]|^\.\.?$/.test(blob.pack) || !isCount(blob.offset)) return 'bad_blob';
  return undefined;
}

/**
 * Manifests that passed, by object (a manifest is never mutated): an apply of one change checks its target and base
 * of 10,000 entries each, and the base was most often the previous apply's target.
 */
const checked = new WeakSet<TreeManifest>();

/** Throws unless every entry is acceptable, paths strictly sorted, and each entry's parent a directory of the tree. */
export function checkManifest(manifest: TreeManifest): void {
  if (checked.has(manifest)) return;
  if (manifest?.version !== 1 || !Array.isArray(manifest.entries)) throw refuse(null, 'bad_manifest');
  const directories = new Set<string>();
  let last: string | undefined;
  for (const entry of manifest.entries) {
    const problem = pathProblem(entry?.path) ?? entryProblem(entry);
    if (problem) throw refuse(entry?.path, problem);
    if (last !== undefined && comparePaths(last, entry.path) >= 0) throw refuse(entry.path, 'unsorted');
    const slash = entry.path.lastIndexOf('/');
    if (slash > 0 && !directories.has(entry.path.slice(0, slash))) throw refuse(entry.path, 'parent_not_directory');
    if (entry.type === 'directory') directories.add(entry.path);
    last = entry.path;
  }
  checked.add(manifest);
}
