/**
 * Workspaces for callers (issue 13): managed ones created in the caller's scope, directory ones registered from the
 * admin's mappings at start, listed, read, deleted, and their file history paged from their own stream. Deleting
 * retires the storage's ownership first, so no turn can take it while, or after, it goes.
 */
import { randomBytes } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import type { OwnershipContext } from '../../machines/ownership.machine.ts';
import type { Page } from '../../projections/projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { WorkspaceEntry } from '../../projections/workspaces.projection.ts';
import type { EventStore } from '../../store/event-store.ts';
import { inScope, listedScope } from '../caller.ts';
import { decodeCursor, encodeCursor, listingOf, pageRange, type Listing, type PageQuery } from '../listing.ts';
import type { Caller } from '../caller.ts';
import { assertQuota, type RolePolicy } from '../role-policy.ts';
import type { WorkspaceDirectories } from './workspace-directories.ts';
import { directoryWorkspaceId, storageKey } from './workspace-roots.ts';

const WORKSPACE_ID = /^hwsp_[0-9a-f]{32}$/;

/** A workspace as callers see it (no host path: a root is the admin's business). */
export interface WorkspaceRecord {
  id: string;
  object: 'workspace';
  kind: 'directory' | 'managed';
  storageId: string;
  name: string | null;
  generation: number;
  state: 'active' | 'deleted';
  /** The turn holding the storage now, if any. */
  holder: { turnId: string; sessionId: string; since: number } | null;
  /** The head: moved by every recorded change and published checkpoint (what a restore's expectedRevision names). */
  revision: number;
  /** The latest published checkpoint and the revision it made. */
  checkpoint: { id: string; revision: number } | null;
  createdAt: number;
  updatedAt: number;
}

/** One file-history entry: what a tool call or a shell command changed, in which turn, when. */
export interface HistoryEntry {
  revision: number;
  turnId: string;
  tool: string;
  executionId?: string;
  changes: { path: string; kind: string; before: { size: number; hash: string } | null; after: { size: number; hash: string } | null }[];
  truncated?: boolean;
  at: number;
}

export interface WorkspaceServiceDeps {
  actors: ActorRuntime<any>;
  store: EventStore;
  directories: WorkspaceDirectories;
  workspaces: ReadModel;
  now: () => number;
  /** Members' quota of managed workspaces. */
  policy: RolePolicy;
}

export class WorkspaceService {
  /** Creates one after another, each counted once the read model shows the one before (the quota holds under a burst). */
  private creating: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: WorkspaceServiceDeps) {}

  /**
   * Records each admin mapping as a directory workspace (once), and moves its generation on when the root found
   * now is another directory than the one recorded: sessions bound before are refused from then on.
   */
  async registerMapped(): Promise<void> {
    for (const m of this.deps.directories.mappings) {
      const id = directoryWorkspaceId(m.scope, m.storageId);
      const snapshot = this.deps.directories.mapped.get(storageKey(m.scope, m.storageId))!;
      const view = await this.deps.actors.get<WorkspaceContext>('workspace', id);
      await this.deps.directories.makeStaging(id);
      const at = this.deps.now();
      if (!view || view.state === 'pristine') {
        await this.deps.actors.send('workspace', id, { type: 'workspace.created', scope: m.scope, kind: 'directory', storageId: m.storageId, identity: snapshot.identity, at });
      } else if (view.state === 'active' && view.context.identity !== snapshot.identity) {
        await this.deps.actors.send('workspace', id, { type: 'workspace.rebound', identity: snapshot.identity, at });
      }
    }
  }

  async create(caller: Caller, input: { name?: string }): Promise<WorkspaceRecord> {
    const run = this.creating.then(async () => {
      assertQuota(caller, 'workspaces', this.deps.policy.quotas.workspaces, this.deps.workspaces.query.managedCount(caller.scope) as number);
      const id = `hwsp_${randomBytes(16).toString('hex')}`;
      const identity = await this.deps.directories.createManaged(id);
      const sent = await this.deps.actors.send('workspace', id, {
        type: 'workspace.created',
        scope: caller.scope,
        kind: 'managed',
        storageId: id,
        ...(input.name !== undefined ? { name: input.name } : {}),
        identity,
        at: this.deps.now(),
      });
      await this.deps.workspaces.waitFor(sent.position, 10_000);
      return id;
    });
    this.creating = run.catch(() => undefined);
    return this.get(caller, await run);
  }

  async list(caller: Caller, query?: PageQuery): Promise<Listing<WorkspaceRecord>> {
    const page = this.deps.workspaces.query.page(listedScope(caller), pageRange(query)) as Page<WorkspaceEntry>;
    const views = await Promise.all(page.rows.map((r) => this.get(caller, r.id).catch((e) => (isBerthError(e, 'not_found') ? undefined : Promise.reject(e)))));
    return listingOf(page, views.filter((v): v is WorkspaceRecord => v !== undefined));
  }

  async get(caller: Caller, id: string): Promise<WorkspaceRecord> {
    const c = (await this.view(caller, id)).context;
    const ownership = await this.ownership(c);
    return {
      id,
      object: 'workspace',
      kind: c.kind,
      storageId: c.storageId,
      name: c.name,
      generation: c.generation,
      state: 'active',
      holder: ownership?.holder ?? null,
      revision: c.revision,
      checkpoint: c.checkpoint,
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
    };
  }

  /** The storage is retired first (workspace_busy while a turn holds it), then the workspace is deleted. */
  async delete(caller: Caller, id: string): Promise<void> {
    const c = (await this.view(caller, id)).context;
    if (c.kind === 'directory') {
      throw new BerthError('invalid_state', 'A directory workspace is the admin\'s mapping: it goes when the mapping is removed.', { workspaceId: id, reason: 'directory_workspace' });
    }
    const at = this.deps.now();
    try {
      await this.deps.actors.send('ownership', storageKey(c.scope, c.storageId), { type: 'ownership.retired', at });
    } catch (e) {
      // Retired by an earlier delete whose answer was lost: go on to the workspace's own delete.
      if (!isBerthError(e, 'workspace_unavailable')) throw e;
    }
    const sent = await this.deps.actors.send('workspace', id, { type: 'workspace.deleted', at });
    await this.deps.workspaces.waitFor(sent.position, 10_000);
  }

  /** One page of the workspace's file history, oldest first; the cursor is the stream revision to go on from. */
  async history(caller: Caller, id: string, query: PageQuery = {}): Promise<Listing<HistoryEntry>> {
    await this.view(caller, id);
    const { limit } = pageRange({ ...query, cursor: undefined });
    const from = query.cursor === undefined ? 0n : BigInt(decodeCursor(query.cursor) - 1);
    const events = await this.deps.store.readStream(`workspace-${id}`, { from, maxCount: limit });
    const items: HistoryEntry[] = [];
    for (const e of events) {
      if (e.type !== 'workspace.files_changed') continue;
      const d = e.data as Omit<HistoryEntry, 'revision'>;
      items.push({ revision: Number(e.revision), turnId: d.turnId, tool: d.tool, ...(d.executionId ? { executionId: d.executionId } : {}), changes: d.changes, ...(d.truncated ? { truncated: true } : {}), at: d.at });
    }
    const last = events.at(-1);
    return { items, ...(events.length === limit && last ? { next: encodeCursor(Number(last.revision) + 2) } : {}) };
  }

  /** The workspace's context, in the caller's scope and not deleted (else not_found / workspace_unavailable). */
  async context(caller: Caller, id: string): Promise<WorkspaceContext> {
    return (await this.view(caller, id)).context;
  }

  private async view(caller: Caller, id: string): Promise<ActorView<WorkspaceContext>> {
    const view = WORKSPACE_ID.test(id) ? await this.deps.actors.get<WorkspaceContext>('workspace', id) : undefined;
    if (!view || view.state === 'pristine' || !inScope(caller, view.context.scope)) {
      throw new BerthError('not_found', 'No such workspace.', { workspaceId: id });
    }
    if (view.state !== 'active') throw new BerthError('workspace_unavailable', 'The workspace is deleted.', { workspaceId: id, reason: 'deleted' });
    return view;
  }

  private async ownership(c: WorkspaceContext): Promise<OwnershipContext | undefined> {
    return (await this.deps.actors.get<OwnershipContext>('ownership', storageKey(c.scope, c.storageId)))?.context;
  }
}
