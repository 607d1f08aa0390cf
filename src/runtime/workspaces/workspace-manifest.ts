/**
 * A workspace's manifest (every regular file with its size and sha256, every directory) and the difference of two:
 * how a shell command's changes are recorded when it ends. The walk is descriptor-relative and never follows a link.
 */
import { closeSync, constants, fstatSync, lstatSync, readdirSync } from 'node:fs';
import { at, MAX_REMOVE_DEPTH, openDir, openDirAt, openEntry } from '../../providers/spool-dir.ts';
import { BerthError } from '../../../schemas/errors.ts';
import { WORKSPACE_INPUTS_NAME } from '../../providers/provider.ts';
import { EventLoopSlices } from '../../providers/event-loop-slices.ts';
import { DIRECTORY_STAMP, knownStamp, nowNs, stampOfOpenFile, type FileStamp } from './file-stamp.ts';

/** Berth's own directory at the workspace root: no tool and no manifest ever looks inside. */
export const PRIVATE_DIR = '.berth';
/**
 * Staged inputs, shown at the root under this name: tools may read, list and stat them; only `stage` writes there.
 * They live outside the workspace, so what a command finds under this name in the root itself (the mount point of
 * its read-only view) is not the workspace's content: no manifest records it.
 */
export const INPUTS_DIR = WORKSPACE_INPUTS_NAME;

export interface Manifest {
  files: Record<string, FileStamp>;
  directories: string[];
  truncated: boolean;
}

export interface ManifestLimits {
  /** Files recorded at most (default 100,000). */
  maxFiles?: number;
  /** Bytes hashed at most (default 2 GiB); a file that would pass it is not hashed. */
  maxBytes?: number;
}

export interface FileChange {
  path: string;
  kind: 'file' | 'directory';
  before: FileStamp | null;
  after: FileStamp | null;
}

const DEFAULT_MAX_FILES = 100_000;
const DEFAULT_MAX_BYTES = 2 * 1024 ** 3;

/** Skipped quietly: the entry changed under the walk, or is not something the manifest records. */
const skip = (): Error => new Error('skipped');

/**
 * The manifest of the directory `root` (canonical and trusted). Recorded: regular files with a single link, and
 * directories. Not recorded, and never followed: symbolic links, FIFOs, sockets, devices, files with several links
 * (maybe a host file linked in, which the server must not read), and `PRIVATE_DIR` and `INPUTS_DIR` at the root.
 */
export async function manifestOf(root: string, limits: ManifestLimits = {}): Promise<Manifest> {
  const fd = openDir(root);
  if (fd === undefined) throw new BerthError('workspace_unavailable', 'The workspace directory is gone.', {});
  try {
    return await manifestAt(fd, '', limits);
  } finally {
    closeSync(fd);
  }
}

/** The manifest of the directory open as `dirFd`, its paths under `prefix` ('' for the workspace root). */
export async function manifestAt(dirFd: number, prefix: string, limits: ManifestLimits = {}): Promise<Manifest> {
  const manifest: Manifest = { files: {}, directories: [], truncated: false };
  const budget = { files: limits.maxFiles ?? DEFAULT_MAX_FILES, bytes: limits.maxBytes ?? DEFAULT_MAX_BYTES, slices: new EventLoopSlices() };
  await walk(dirFd, prefix, 0, manifest, budget);
  return manifest;
}

interface Budget {
  files: number;
  bytes: number;
  slices: EventLoopSlices;
}

async function walk(dirFd: number, prefix: string, depth: number, manifest: Manifest, budget: Budget): Promise<void> {
  const entries = readdirSync(at(dirFd, '.'), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (manifest.truncated) return;
    if (prefix === '' && (entry.name === PRIVATE_DIR || entry.name === INPUTS_DIR)) continue;
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) {
      // Each level holds a descriptor: deeper nests are cut off (truncated), at the depth the tree removal stops too.
      if (depth + 1 >= MAX_REMOVE_DEPTH) {
        manifest.truncated = true;
        return;
      }
      const child = openChildDir(dirFd, entry.name);
      if (child === undefined) continue;
      manifest.directories.push(path);
      try {
        await walk(child, path, depth + 1, manifest, budget);
      } finally {
        closeSync(child);
      }
    } else if (entry.isFile()) {
      // A file whose stamp is remembered needs no await: no promise per file of a tree of thousands.
      const hashing = stampFile(dirFd, entry.name, path, manifest, budget);
      if (hashing) await hashing;
    }
    const pause = budget.slices.breathe();
    if (pause) await pause;
  }
}

function openChildDir(dirFd: number, name: string): number | undefined {
  try {
    return openDirAt(dirFd, name, skip);
  } catch {
    return undefined; // swapped for a link or a file since it was listed
  }
}

/**
 * Records the file's stamp. A settled file hashed before and unchanged since needs only its lstat (through the
 * directory's descriptor, nothing followed); any other is opened without following and hashed.
 */
function stampFile(dirFd: number, name: string, path: string, manifest: Manifest, budget: Budget): Promise<void> | undefined {
  const record = (stamp: FileStamp): void => {
    budget.files -= 1;
    budget.bytes -= stamp.size;
    manifest.files[path] = stamp;
  };
  const overBudget = (size: bigint): boolean => {
    if (budget.files > 0 && Number(size) <= budget.bytes) return false;
    manifest.truncated = true;
    return true;
  };
  const listed = lstatSync(at(dirFd, name), { bigint: true, throwIfNoEntry: false });
  const known = listed?.isFile() && listed.nlink === 1n ? knownStamp(listed) : undefined;
  if (known) {
    if (!overBudget(listed!.size)) record(known);
    return;
  }
  let fd: number | undefined;
  try {
    fd = openEntry(dirFd, name, constants.O_RDONLY, 'file', skip);
  } catch {
    return; // a link, special file or several-link file now
  }
  if (fd === undefined) return;
  const open = fd;
  let hashing: Promise<void> | undefined;
  try {
    const takenAt = nowNs();
    const stats = fstatSync(open, { bigint: true });
    if (overBudget(stats.size)) return;
    hashing = stampOfOpenFile(open, stats, takenAt).then(record).finally(() => closeSync(open));
    return hashing;
  } finally {
    if (!hashing) closeSync(open);
  }
}

/** Files added, removed or changed and directories added or removed, sorted by path (a file before a directory). */
export function diffManifests(before: Manifest, after: Manifest): FileChange[] {
  const changes: FileChange[] = [];
  for (const [path, stamp] of Object.entries(after.files)) {
    const old = before.files[path];
    if (!old) changes.push({ path, kind: 'file', before: null, after: stamp });
    else if (old.hash !== stamp.hash || old.size !== stamp.size) changes.push({ path, kind: 'file', before: old, after: stamp });
  }
  for (const [path, stamp] of Object.entries(before.files)) {
    if (!(path in after.files)) changes.push({ path, kind: 'file', before: stamp, after: null });
  }
  const beforeDirs = new Set(before.directories);
  const afterDirs = new Set(after.directories);
  for (const path of afterDirs) if (!beforeDirs.has(path)) changes.push({ path, kind: 'directory', before: null, after: DIRECTORY_STAMP });
  for (const path of beforeDirs) if (!afterDirs.has(path)) changes.push({ path, kind: 'directory', before: DIRECTORY_STAMP, after: null });
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.kind === b.kind ? 0 : a.kind === 'file' ? -1 : 1));
}
