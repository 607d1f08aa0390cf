/**
 * Where an Environment's content lives under the data directory, and crash recovery of that place:
 *
 *   <dataDir>/environments/<envId>/source/       the files the owner puts in (writable through the API)
 *   <dataDir>/environments/<envId>/versions/<n>/ built versions (read-only once built)
 *   <dataDir>/environments/<envId>/staging/      temporary files and imports, on the same filesystem as source and
 *                                               versions so that publishing is one rename
 *
 * A path inside the source is bounded so that it stays well under PATH_MAX (4,096) wherever Berth may move it.
 */
import { opendirSync, type Dir } from 'node:fs';
import { readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { removeTree } from './remove-tree.ts';

export interface ContentLayout {
  root: string;
  source: string;
  versions: string;
  staging: string;
  /** The longest relative path (bytes) a source file or directory may have: see MAX_CONTENT_ABSOLUTE_BYTES. */
  maxPathBytes: number;
}

/**
 * The longest absolute path (bytes) a content path may reach in its deepest location. PATH_MAX is 4,096; the rest is
 * headroom for what tools (installers, git, tar) add below a path they are handed.
 */
export const MAX_CONTENT_ABSOLUTE_BYTES = 3840;
/**
 * Room for the deepest directory a source path is moved or copied under: `staging/replaced-<ms>-<uuid>/` (a
 * replacing import), `staging/removed-<uuid>/`, `staging/import-<uuid>/tree/`, `versions/.partial-<n>-<uuid>/`. All
 * are under 80 bytes; a path accepted in `source/` therefore fits in every one of them.
 */
const DEEPEST_CONTAINER_BYTES = 128;

export function contentLayout(environmentDir: string): ContentLayout {
  const rootBytes = Buffer.byteLength(path.resolve(environmentDir));
  return {
    root: environmentDir,
    source: path.join(environmentDir, 'source'),
    versions: path.join(environmentDir, 'versions'),
    staging: path.join(environmentDir, 'staging'),
    maxPathBytes: Math.max(0, MAX_CONTENT_ABSOLUTE_BYTES - rootBytes - 1 - DEEPEST_CONTAINER_BYTES),
  };
}

/** The content directory of one environment; the id must be one plain path segment. */
export function environmentDir(dataDir: string, environmentId: string): string {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(environmentId)) {
    throw new BerthError('environment_invalid', 'Not an environment id.', { environmentId });
  }
  return path.join(dataDir, 'environments', environmentId);
}

export function versionDir(layout: ContentLayout, version: number): string {
  if (!Number.isSafeInteger(version) || version < 1) throw new BerthError('invalid_request', 'A version is a positive integer.', { version });
  return path.join(layout.versions, String(version));
}

/** Prefix of a source tree moved aside by a replacing import, until the new one is in place. */
export const REPLACED_PREFIX = 'replaced-';
/** Prefix of a version directory being copied, until it is complete and renamed to its number. */
export const PARTIAL_VERSION_PREFIX = '.partial-';

/** What recovery does with a step it could not finish (the default: throw). */
export type RecoveryProblem = (step: 'restore_source' | 'clear_staging' | 'remove_partial_version', error: unknown) => void;

/**
 * Bring an environment's content back to a whole state after a crash; call it at startup, before admitting work.
 * A replacing import that moved the old source aside but never put the new one in place gets the old one back;
 * everything else in staging, and every partial version copy, is garbage. Each step is tried whatever the one
 * before did; one that fails goes to `problem` (a caller at startup logs it and goes on: garbage left behind does
 * no harm, a server that does not start does).
 */
export async function recoverContent(layout: ContentLayout, problem: RecoveryProblem = (_, e) => { throw e; }): Promise<void> {
  const attempt = async (step: Parameters<RecoveryProblem>[0], work: () => Promise<void>) => {
    try {
      await work();
    } catch (e) {
      problem(step, e);
    }
  };
  await attempt('restore_source', async () => {
    if ((await readdirOrEmpty(layout.root)).includes('source')) return;
    const replaced = (await readdirOrEmpty(layout.staging)).filter((name) => name.startsWith(REPLACED_PREFIX)).sort();
    if (replaced.length > 0) await rename(path.join(layout.staging, replaced[replaced.length - 1]), layout.source);
  });
  await attempt('clear_staging', () => removeTree(layout.staging));
  await attempt('remove_partial_version', async () => {
    const partial = (await readdirOrEmpty(layout.versions)).filter((name) => name.startsWith(PARTIAL_VERSION_PREFIX));
    for (const name of partial) await removeTree(path.join(layout.versions, name));
  });
}

export async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

/**
 * Whether `dir` exists and holds anything. Synchronous: it reads one entry, microseconds, and it sits on the
 * execution path, where a thread-pool round trip costs far more on a busy host.
 */
export function hasEntries(dir: string): boolean {
  let handle: Dir;
  try {
    handle = opendirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  try {
    return handle.readSync() !== null;
  } finally {
    handle.closeSync();
  }
}
