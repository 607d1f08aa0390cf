/**
 * File operations inside a directory held open by descriptor, none of which follows a link: how the host touches a
 * spool that a command can write (a Docker or contained command owns its operation directory and may swap any entry
 * for a symlink, FIFO or directory at any moment). Node has no openat, but on Linux `/proc/self/fd/<dirfd>/<name>`
 * looks <name> up inside the very directory the descriptor holds, however it was renamed or replaced since, and
 * O_NOFOLLOW, lstat, mkdir, rename, unlink and rmdir act on that entry itself: race-free by construction, no check
 * then use.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, rmdirSync, unlinkSync, writeSync, type Stats } from 'node:fs';
import { BerthError } from '../../schemas/errors.ts';

const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_APPEND, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** Never follows a final link, never blocks on a FIFO (its type is looked at once it is open). */
const SAFE = O_NOFOLLOW | O_NONBLOCK;
/** Deeper than any tree the host makes; a command's deeper nest is left to the volume's (or directory's) removal. */
export const MAX_REMOVE_DEPTH = 64;

export const errorCode = (e: unknown): string | undefined => (e as NodeJS.ErrnoException).code;
const isMissing = (e: unknown): boolean => errorCode(e) === 'ENOENT';

/** The name `name` inside the directory open as `dirFd`, for the calls that take a path. */
export const at = (dirFd: number, name: string): string => `/proc/self/fd/${dirFd}/${name}`;

/** What the command put where the host expected a regular file (or FIFO): refused, never opened through. */
export function refusedEntry(operationId: string, name: string, kind: string): BerthError {
  return new BerthError('invalid_state', `The spool entry "${name}" is a ${kind}, not a file the runtime wrote or can trust; it is not read.`, {
    operationId,
    file: name,
    kind,
  });
}

/** What the entry is now (it may have changed again since an open refused it). */
const kindOfEntry = (dirFd: number, name: string): string => {
  const stats = lstatAt(dirFd, name);
  return stats ? kindOf(stats) : 'entry that vanished';
};

export function kindOf(stats: Stats): string {
  if (stats.isFile()) return 'regular file';
  if (stats.isSymbolicLink()) return 'symbolic link';
  if (stats.isFIFO()) return 'FIFO';
  if (stats.isDirectory()) return 'directory';
  return 'special file';
}

/** A directory by path, its last component never followed (the path above it must be the host's own). */
export function openDir(path: string): number | undefined {
  try {
    return openSync(path, DIR_FLAGS);
  } catch (e) {
    if (isMissing(e)) return undefined;
    if (errorCode(e) === 'ELOOP' || errorCode(e) === 'ENOTDIR') {
      throw new BerthError('internal', 'A spool root is not a directory (a link or a file in its place); it is not used.', {});
    }
    throw e;
  }
}

/**
 * An entry of `dirFd` opened without following it; undefined when missing. `expect` is the only type accepted
 * (checked on the open descriptor, so what is used is what was checked); anything else throws `refuse(kind)`.
 */
export function openEntry(dirFd: number, name: string, flags: number, expect: 'file' | 'fifo', refuse: (kind: string) => Error): number | undefined {
  let fd: number;
  try {
    fd = openSync(at(dirFd, name), flags | SAFE, 0o644);
  } catch (e) {
    if (isMissing(e)) return undefined;
    // ELOOP: a symbolic link; ENXIO: a FIFO opened for writing with no reader; EISDIR: a directory opened to write.
    if (errorCode(e) === 'ELOOP' || errorCode(e) === 'ENXIO' || errorCode(e) === 'EISDIR') throw refuse(kindOfEntry(dirFd, name));
    throw e;
  }
  const stats = fstatSync(fd);
  // A second name (a hard link, possible within one mount only) may be a file the command did not make.
  const ok = expect === 'fifo' ? stats.isFIFO() : stats.isFile() && stats.nlink === 1;
  if (!ok) {
    closeSync(fd);
    throw refuse(stats.isFile() ? 'file with several links' : kindOf(stats));
  }
  return fd;
}

export const READ_FLAGS = O_RDONLY;
export const APPEND_FLAGS = O_WRONLY | O_APPEND | O_CREAT;
export const FIFO_WRITE_FLAGS = O_RDWR;

/** The entry's own lstat (a link is described, never followed); undefined when missing. */
export function lstatAt(dirFd: number, name: string): Stats | undefined {
  return lstatSync(at(dirFd, name), { throwIfNoEntry: false });
}

/** O_EXCL create of a new file holding `content`: false when the name is taken (by anything, a link included). */
export function createAt(dirFd: number, name: string, content: string | Buffer, mode = 0o644): boolean {
  let fd: number;
  try {
    fd = openSync(at(dirFd, name), O_WRONLY | O_CREAT | O_EXCL | SAFE, mode);
  } catch (e) {
    if (errorCode(e) === 'EEXIST') return false;
    throw e;
  }
  try {
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done);
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Writes `content` under a fresh `tmp` and renames it over `name`, both in `dirFd`: readers see all of it or none.
 * Whatever sat at `tmp` (a planted link) is unlinked first, never written through.
 */
export function replaceAt(dirFd: number, tmp: string, name: string, content: string): void {
  for (let attempt = 0; !createAt(dirFd, tmp, content); attempt++) {
    if (attempt === 3) throw new BerthError('internal', `Cannot create "${tmp}" in a spool directory: its name keeps being taken.`, { file: tmp });
    removeEntryAt(dirFd, tmp);
  }
  renameSync(at(dirFd, tmp), at(dirFd, name));
}

/** mkdir of `name` in `dirFd`: true when made, false when the name already existed (as anything). */
export function mkdirAt(dirFd: number, name: string, mode = 0o755): boolean {
  try {
    mkdirSync(at(dirFd, name), mode);
    return true;
  } catch (e) {
    if (errorCode(e) === 'EEXIST') return false;
    throw e;
  }
}

/** The subdirectory `name` of `dirFd`, opened without following; undefined when missing; a link or file throws. */
export function openDirAt(dirFd: number, name: string, refuse: (kind: string) => Error): number | undefined {
  try {
    return openSync(at(dirFd, name), DIR_FLAGS);
  } catch (e) {
    if (isMissing(e)) return undefined;
    if (errorCode(e) === 'ELOOP' || errorCode(e) === 'ENOTDIR') throw refuse(kindOfEntry(dirFd, name));
    throw e;
  }
}

/** Removes the entry: a link itself (never its target), a file, or a directory with everything in it. */
export function removeEntryAt(dirFd: number, name: string): void {
  removeAt(dirFd, name, 0);
}

/** Removes the directory `name` of `dirFd` and everything in it (see removeAt). */
export function removeTreeAt(dirFd: number, name: string): void {
  removeDirAt(dirFd, name, 0);
}

function removeAt(dirFd: number, name: string, depth: number): void {
  try {
    unlinkSync(at(dirFd, name));
  } catch (e) {
    if (isMissing(e)) return;
    if (errorCode(e) !== 'EISDIR' && errorCode(e) !== 'EPERM') throw e;
    removeDirAt(dirFd, name, depth);
  }
}

/**
 * Each level is reached through a descriptor opened without following: a subdirectory the command swaps for a link
 * meanwhile is unlinked as a link, never descended into, so nothing outside the tree is ever removed (the race
 * `rm -rf` has).
 */
function removeDirAt(dirFd: number, name: string, depth: number): void {
  let fd: number;
  try {
    fd = openSync(at(dirFd, name), DIR_FLAGS);
  } catch (e) {
    if (isMissing(e)) return;
    // Swapped for a link or a file since it was listed: the entry goes, its target stays.
    if (errorCode(e) === 'ELOOP' || errorCode(e) === 'ENOTDIR') return removeAt(dirFd, name, depth);
    throw e;
  }
  try {
    if (depth >= MAX_REMOVE_DEPTH) throw new BerthError('internal', 'A spool directory is nested too deep to remove entry by entry.', { depth });
    for (const entry of readdirSync(at(fd, '.'))) removeAt(fd, entry, depth + 1);
  } finally {
    closeSync(fd);
  }
  try {
    rmdirSync(at(dirFd, name));
  } catch (e) {
    if (!isMissing(e)) throw e;
  }
}
