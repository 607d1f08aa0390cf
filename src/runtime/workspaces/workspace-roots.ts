/**
 * Where workspaces live on this host (issue 13, seed 004 "Trusted Session and storage resolution"). Directory
 * workspaces come from the admin's mappings `{scope, storageId, root}` (BERTH_WORKSPACE_ROOTS: a JSON array, or the
 * path of a file holding one): each root must be a canonical existing directory; duplicates and overlaps (one root
 * inside another, across scopes too) and roots that meet the data directory are refused at start; the canonical path
 * and filesystem identity (dev/ino) are snapshotted then, and a root gone or replaced later is
 * `workspace_unavailable`. Berth never creates these directories. Managed workspaces live under the data directory.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BerthError } from '../../../schemas/errors.ts';
import { storageIdSchema } from '../../../schemas/events/workspace.ts';

export interface RootMapping {
  scope: string;
  storageId: string;
  root: string;
}

/** A root as it was found at start: the identity later checks compare with. */
export interface RootSnapshot {
  root: string;
  dev: number;
  ino: number;
  /** sha256 of (root, dev, ino): what events record instead of a host path. */
  identity: string;
}

const mappingSchema = z.array(
  z.strictObject({
    scope: z.string().min(1).max(200),
    // A managed workspace's storage is its id (hwsp_…): a mapping may not take that spelling.
    storageId: storageIdSchema.refine((s) => !s.startsWith('hwsp_'), 'hwsp_ names managed workspaces'),
    root: z.string().min(1).max(4096),
  }),
);

const within = (p: string, dir: string): boolean => p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`);

export const identityOf = (root: string, dev: number, ino: number): string =>
  createHash('sha256').update(`${root}\0${dev}\0${ino}`).digest('hex');

/** The mappings of BERTH_WORKSPACE_ROOTS (inline JSON, or a file path), or none. */
export function mappingsFromEnv(env: NodeJS.ProcessEnv = process.env): RootMapping[] {
  const raw = env.BERTH_WORKSPACE_ROOTS?.trim();
  if (!raw) return [];
  let text = raw;
  if (!raw.startsWith('[')) {
    try {
      text = readFileSync(raw, 'utf8');
    } catch (e) {
      throw new BerthError('invalid_request', `BERTH_WORKSPACE_ROOTS names a file that cannot be read: ${(e as Error).message}`, { setting: 'BERTH_WORKSPACE_ROOTS' });
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BerthError('invalid_request', 'BERTH_WORKSPACE_ROOTS is not a JSON array of {scope, storageId, root}.', { setting: 'BERTH_WORKSPACE_ROOTS' });
  }
  const result = mappingSchema.safeParse(parsed);
  if (!result.success) {
    throw new BerthError('invalid_request', `BERTH_WORKSPACE_ROOTS: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, {
      setting: 'BERTH_WORKSPACE_ROOTS',
    });
  }
  return result.data;
}

/** Snapshots every mapping, or refuses the whole configuration (the start fails: nothing half-configured). */
export function snapshotRoots(mappings: RootMapping[], dataDir: string): Map<string, RootSnapshot> {
  const refuse = (message: string, detail: Record<string, unknown>): never => {
    throw new BerthError('invalid_request', `BERTH_WORKSPACE_ROOTS: ${message}`, { setting: 'BERTH_WORKSPACE_ROOTS', ...detail });
  };
  const data = [path.resolve(dataDir), ...(existsSync(dataDir) ? [realpathSync(dataDir)] : [])];
  const seen: (RootMapping & RootSnapshot)[] = [];
  const out = new Map<string, RootSnapshot>();
  for (const m of mappings) {
    if (!path.isAbsolute(m.root)) refuse('a root is an absolute path', { root: m.root });
    let real: string | undefined;
    try {
      real = realpathSync(m.root);
    } catch {
      refuse('a root does not exist (Berth never creates it)', { root: m.root });
    }
    if (real !== m.root) refuse('a root must be canonical (no link, no `..`, no trailing slash)', { root: m.root, canonical: real });
    const st = lstatSync(m.root);
    if (!st.isDirectory()) refuse('a root is not a directory', { root: m.root });
    if (data.some((d) => within(m.root, d) || within(d, m.root))) refuse('a root may not contain or lie in the data directory', { root: m.root });
    for (const other of seen) {
      if (other.scope === m.scope && other.storageId === m.storageId) refuse('a storage is mapped twice', { scope: m.scope, storageId: m.storageId });
      // The same directory by another name (a bind mount) shares dev/ino: an alias, refused like an overlap.
      if (within(m.root, other.root) || within(other.root, m.root) || (other.dev === st.dev && other.ino === st.ino)) {
        refuse('two roots overlap (one lies in the other, or both are the same directory)', { roots: [other.root, m.root] });
      }
    }
    const snapshot = { root: m.root, dev: st.dev, ino: st.ino, identity: identityOf(m.root, st.dev, st.ino) };
    seen.push({ ...m, ...snapshot });
    out.set(storageKey(m.scope, m.storageId), snapshot);
  }
  return out;
}

/** The ownership actor's id of a storage (scope and storage id hashed: stream names stay short and plain). */
export const storageKey = (scope: string, storageId: string): string =>
  `own_${createHash('sha256').update(`${scope}\0${storageId}`).digest('hex').slice(0, 32)}`;

/** The directory workspace's id for a mapping: derived, so every start (and every runtime) names it alike. */
export const directoryWorkspaceId = (scope: string, storageId: string): string =>
  `hwsp_${createHash('sha256').update(`directory\0${scope}\0${storageId}`).digest('hex').slice(0, 32)}`;

/**
 * Throws workspace_unavailable unless `root` is still the directory snapshotted (same dev/ino, not a link): a root
 * deleted, or replaced by another directory at the same path, is never used.
 */
export function assertRoot(snapshot: RootSnapshot, workspaceId: string): void {
  let st;
  try {
    st = lstatSync(snapshot.root);
  } catch {
    throw new BerthError('workspace_unavailable', 'The workspace\'s directory is gone.', { workspaceId, reason: 'root_missing' });
  }
  if (!st.isDirectory() || st.dev !== snapshot.dev || st.ino !== snapshot.ino) {
    throw new BerthError('workspace_unavailable', 'The workspace\'s directory was replaced since the server started.', { workspaceId, reason: 'root_replaced' });
  }
}
