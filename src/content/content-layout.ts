/**
 * Where an Environment's content lives under the data directory, and crash recovery of that place:
 *
 *   <dataDir>/environments/<envId>/source/       the files the owner puts in (writable through the API)
 *   <dataDir>/environments/<envId>/versions/<n>/ built versions (read-only once built)
 *   <dataDir>/environments/<envId>/staging/      temporary files and imports, on the same filesystem as source and
 *                                               versions so that publishing is one rename
 */
import { opendirSync, type Dir } from 'node:fs';
import { readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';

export interface ContentLayout {
  root: string;
  source: string;
  versions: string;
  staging: string;
}

export function contentLayout(environmentDir: string): ContentLayout {
  return {
    root: environmentDir,
    source: path.join(environmentDir, 'source'),
    versions: path.join(environmentDir, 'versions'),
    staging: path.join(environmentDir, 'staging'),
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

/**
 * Bring an environment's content back to a whole state after a crash; call it at startup, before admitting work.
 * A replacing import that moved the old source aside but never put the new one in place gets the old one back;
 * everything else in staging, and every partial version copy, is garbage.
 */
export async function recoverContent(layout: ContentLayout): Promise<void> {
  const staged = await readdirOrEmpty(layout.staging);
  if (!(await readdirOrEmpty(layout.root)).includes('source')) {
    const replaced = staged.filter((name) => name.startsWith(REPLACED_PREFIX)).sort();
    if (replaced.length > 0) await rename(path.join(layout.staging, replaced[replaced.length - 1]), layout.source);
  }
  await rm(layout.staging, { recursive: true, force: true });
  for (const name of await readdirOrEmpty(layout.versions)) {
    if (name.startsWith(PARTIAL_VERSION_PREFIX)) await rm(path.join(layout.versions, name), { recursive: true, force: true });
  }
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
