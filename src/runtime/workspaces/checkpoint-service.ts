/**
 * Checkpoints for callers (issue 14): the published ones of a workspace (its stream's `workspace.checkpoint_published`
 * events), one's tree, the diff between two, an explicit checkpoint and a restore inside a turn (which holds the
 * storage), the workspace's view and its explicit detachment. A checkpoint id is a content address (of the stored
 * manifest), so it is only ever read for a workspace whose stream published it (no tenant reads another's by guessing).
 */
import { randomUUID } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import { manifestIdSchema } from '../../../schemas/events/mount.ts';
import type { EventStore } from '../../store/event-store.ts';
import type { TreeChange } from '../../providers/tree-diff.ts';
import { diffTrees } from '../../providers/tree-diff.ts';
import type { TreeEntry } from '../../providers/file-host.ts';
import type { Caller } from '../caller.ts';
import { decodeCursor, encodeCursor, pageRange, type Listing, type PageQuery } from '../listing.ts';
import type { MountService } from './mount-service.ts';
import type { TurnService } from './turn-service.ts';
import type { FileChange } from './workspace-manifest.ts';
import type { WorkspaceService } from './workspace-service.ts';

/** Captures of a directory an explicit checkpoint makes before it answers stale_version. */
const DIRECTORY_TRIES = 3;
/** Entries (of a tree, of a diff) one answer carries at most; past it the answer says `truncated`. */
export const MAX_LISTED_ENTRIES = 10_000;

export interface CheckpointRecord {
  id: string;
  object: 'checkpoint';
  workspaceId: string;
  /** The head revision it made. */
  revision: number;
  attemptId: string;
  reason: string;
  executionId?: string;
  mountGeneration?: number;
  files: number;
  bytes: number;
  at: number;
}

export interface MountRecord {
  object: 'mount';
  workspaceId: string;
  state: string;
  target: { environmentId: string; allocationId: string; generation: number } | null;
  mountGeneration: number;
  revision: number | null;
  pins: string[];
  problem: { code: string; message: string } | null;
}

export interface CheckpointServiceDeps {
  store: EventStore;
  workspaces: WorkspaceService;
  turns: TurnService;
  mounts: MountService;
}

export class CheckpointService {
  constructor(private readonly deps: CheckpointServiceDeps) {}

  /** One page of the workspace's published checkpoints, oldest first (the cursor is the stream revision to go on from). */
  async list(caller: Caller, workspaceId: string, query: PageQuery = {}): Promise<Listing<CheckpointRecord>> {
    await this.deps.workspaces.context(caller, workspaceId);
    const { limit } = pageRange({ ...query, cursor: undefined });
    const from = query.cursor === undefined ? 0n : BigInt(decodeCursor(query.cursor) - 1);
    const events = await this.deps.store.readStream(`workspace-${workspaceId}`, { from, maxCount: limit });
    const items = events.filter((e) => e.type === 'workspace.checkpoint_published').map((e) => recordOf(workspaceId, e.data as PublishedData));
    const last = events.at(-1);
    return { items, ...(events.length === limit && last ? { next: encodeCursor(Number(last.revision) + 2) } : {}) };
  }

  /** A checkpoint of the workspace with its tree (paths, types, modes, sizes, hashes). */
  async get(caller: Caller, workspaceId: string, checkpointId: string): Promise<CheckpointRecord & { entries: PublicEntry[]; truncated?: true }> {
    const record = await this.find(caller, workspaceId, checkpointId);
    const tree = await this.deps.mounts.tree(checkpointId);
    const entries = tree.entries.slice(0, MAX_LISTED_ENTRIES).map(publicEntry);
    return { ...record, entries, ...(tree.entries.length > MAX_LISTED_ENTRIES ? { truncated: true as const } : {}) };
  }

  /** What changed from checkpoint `from` to checkpoint `to`, path by path. */
  async diff(caller: Caller, workspaceId: string, from: string, to: string): Promise<{ from: string; to: string; changes: TreeChange[]; truncated?: true }> {
    await this.findAll(caller, workspaceId, [from, to]);
    const changes = diffTrees(await this.deps.mounts.tree(from), await this.deps.mounts.tree(to));
    return { from, to, changes: changes.slice(0, MAX_LISTED_ENTRIES), ...(changes.length > MAX_LISTED_ENTRIES ? { truncated: true as const } : {}) };
  }

  /**
   * An explicit checkpoint in a turn: of the view, when the workspace has an active one (its files are newer than
   * the directory's), else of the directory. stale_version when the head moved while it was taken.
   */
  create(caller: Caller, sessionId: string, turnId: string): Promise<CheckpointRecord> {
    return this.deps.turns.tool(caller, sessionId, turnId, 'checkpoint', async (_files, workspace) => {
      const mount = await this.deps.mounts.get(workspace.id);
      if (mount?.state === 'active') {
        const attemptId = `explicit-${randomUUID()}`;
        const a = await this.deps.mounts.checkpoint(workspace.id, attemptId);
        return { value: await this.find(caller, workspace.id, a.checkpointId!, attemptId), changes: [] };
      }
      // The directory itself: a command of the turn that just ended moves the head when its changes are recorded,
      // which can overtake the capture; taken again on the new head (its files are in the directory already).
      for (let attempt = 1; ; attempt++) {
        const attemptId = `explicit-${randomUUID()}`;
        const head = attempt === 1 ? workspace : await this.deps.workspaces.context(caller, workspace.id);
        try {
          const published = await this.deps.mounts.checkpointDirectory(head, attemptId);
          return { value: await this.find(caller, workspace.id, published.checkpointId, attemptId), changes: [] };
        } catch (e) {
          if (!isBerthError(e, 'stale_version') || attempt === DIRECTORY_TRIES) throw e;
        }
      }
    });
  }

  /**
   * Gives the workspace the tree of one of its checkpoints, in a turn: refused (stale_version) when the head is not
   * `expectedRevision`; recorded in the history like a tool's write (a view elsewhere is brought to it before its next
   * command).
   */
  restore(caller: Caller, sessionId: string, turnId: string, checkpointId: string, expectedRevision?: number): Promise<{ checkpointId: string; changes: FileChange[] }> {
    return this.deps.turns.tool(caller, sessionId, turnId, 'restore', async (_files, workspace) => {
      await this.find(caller, workspace.id, checkpointId);
      if (expectedRevision !== undefined && expectedRevision !== workspace.revision) {
        throw new BerthError('stale_version', 'The workspace changed since the revision named: nothing was restored.', { workspaceId: workspace.id, expected: expectedRevision, head: workspace.revision });
      }
      const changes = (await this.deps.mounts.restoreDirectory(workspace, await this.deps.mounts.tree(checkpointId))).map(fileChangeOf);
      return { value: { checkpointId, changes }, changes, checkpointId };
    });
  }

  async mount(caller: Caller, workspaceId: string): Promise<MountRecord> {
    await this.deps.workspaces.context(caller, workspaceId);
    return mountRecordOf(workspaceId, await this.deps.mounts.get(workspaceId));
  }

  /** Saves and lets the view go (its allocation stays); refused while executions write it. */
  async detach(caller: Caller, workspaceId: string): Promise<MountRecord> {
    await this.deps.workspaces.context(caller, workspaceId);
    const mount = await this.deps.mounts.get(workspaceId);
    if (mount?.state !== 'active' && mount?.state !== 'unavailable') return mountRecordOf(workspaceId, mount);
    return mountRecordOf(workspaceId, await this.deps.mounts.detach(workspaceId, 'explicit'));
  }

  /** The workspace's published checkpoint `checkpointId` (by `attemptId` when given), else not_found. */
  private async find(caller: Caller, workspaceId: string, checkpointId: string, attemptId?: string): Promise<CheckpointRecord> {
    return (await this.findAll(caller, workspaceId, [checkpointId], attemptId))[0]!;
  }

  /** The workspace's published checkpoints with these ids, in that order, from one read of its stream (else not_found). */
  private async findAll(caller: Caller, workspaceId: string, ids: string[], attemptId?: string): Promise<CheckpointRecord[]> {
    await this.deps.workspaces.context(caller, workspaceId);
    const missing = (checkpointId: string) => new BerthError('not_found', 'No such checkpoint.', { workspaceId, checkpointId });
    for (const id of ids) if (!manifestIdSchema.safeParse(id).success) throw missing(id);
    const found = new Map<string, CheckpointRecord>();
    for (const e of (await this.deps.store.readStream(`workspace-${workspaceId}`)).slice().reverse()) {
      const d = e.data as PublishedData;
      if (e.type !== 'workspace.checkpoint_published' || !ids.includes(d.checkpointId) || found.has(d.checkpointId)) continue;
      if (attemptId === undefined || d.attemptId === attemptId) found.set(d.checkpointId, recordOf(workspaceId, d));
    }
    return ids.map((id) => {
      const record = found.get(id);
      if (!record) throw missing(id);
      return record;
    });
  }
}

/** The data of `workspace.checkpoint_published` a record is made from. */
type PublishedData = Omit<CheckpointRecord, 'id' | 'object' | 'workspaceId' | 'revision'> & { checkpointId: string; baseRevision: number };

const recordOf = (workspaceId: string, d: PublishedData): CheckpointRecord => ({
  id: d.checkpointId,
  object: 'checkpoint',
  workspaceId,
  revision: d.baseRevision + 1,
  attemptId: d.attemptId,
  reason: d.reason,
  ...(d.executionId ? { executionId: d.executionId } : {}),
  ...(d.mountGeneration !== undefined ? { mountGeneration: d.mountGeneration } : {}),
  files: d.files,
  bytes: d.bytes,
  at: d.at,
});

/** What a caller sees of a tree entry: no blob location, no capture hint. */
export type PublicEntry = Pick<TreeEntry, 'path' | 'type' | 'mode' | 'size' | 'hash' | 'target'>;
const publicEntry = (e: TreeEntry): PublicEntry => ({
  path: e.path,
  type: e.type,
  mode: e.mode,
  size: e.size,
  ...(e.hash ? { hash: e.hash } : {}),
  ...(e.target !== undefined ? { target: e.target } : {}),
});

/** A tree change as the file history records it (a link counts as a file whose version is its target's). */
const fileChangeOf = (c: TreeChange): FileChange => {
  const stamp = (s: TreeChange['before']) => (s ? { size: s.size, hash: s.hash ?? (s.type === 'directory' ? '' : `symlink:${s.target ?? ''}`.slice(0, 80)) } : null);
  return { path: c.path, kind: c.type === 'directory' ? 'directory' : 'file', before: stamp(c.before), after: stamp(c.after) };
};

const mountRecordOf = (workspaceId: string, view: Awaited<ReturnType<MountService['get']>>): MountRecord => ({
  object: 'mount',
  workspaceId,
  state: String(view?.state ?? 'unbound'),
  target: view?.context.target ?? null,
  mountGeneration: view?.context.mountGeneration ?? 0,
  revision: view?.context.base?.revision ?? null,
  pins: view?.context.pins ?? [],
  problem: view?.context.problem ?? null,
});
