/**
 * Workspace views on allocations that hold them in a staging area of their own (issue 14, DESIGN §10): a view is
 * prepared on an execution's target and refreshed to the head before the execution is accepted, pinned by it until
 * its checkpoint, and saved and detached before its allocation goes. A checkpoint captures the view (through the
 * provider's file host), carries the command's changes into the workspace's directory (the head every file tool
 * reads), and publishes the tree only if the head is still the revision the attempt built on.
 */
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { MountEvent, MountTarget, ViewBase } from '../../../schemas/events/mount.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { DomainEvent } from '../../actors/actor-type.ts';
import type { CheckpointParams, ExecutionContext } from '../../machines/execution.machine.ts';
import type { Attempt, BeginSaveParams, CaptureParams, MaterializeParams, MountContext, UnuseParams } from '../../machines/mount.machine.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import { DirectoryFileHost } from '../../providers/directory-file-host.ts';
import type { CaptureLimits, FileHost, TreeManifest } from '../../providers/file-host.ts';
import { diffTrees, type TreeChange } from '../../providers/tree-diff.ts';
import { crashAt } from '../../providers/crash-point.ts';
import type { AllocationRef, WorkspaceView } from '../../providers/provider.ts';
import { waitUntil } from '../environments/wait-until.ts';
import type { AllocationContext } from '../../machines/allocation.machine.ts';
import type { ProviderRegistry } from '../provider-registry.ts';
import type { CheckpointPacks } from './checkpoint-packs.ts';
import { HIDDEN_FROM_COMMANDS, type WorkspaceDirectories } from './workspace-directories.ts';
import { observeDirectoryCheckpoint } from '../core/duration-spans.ts';
import { BoundedLru } from '../../store/bounded-lru.ts';
import type { BerthMetrics } from '../core/metrics-registry.ts';

/** How long an execution's admission waits for a view being prepared or saved by someone else. */
const SETTLE_WAIT_MS = 120_000;
const EMPTY_TREE: TreeManifest = { version: 1, entries: [], files: 0, bytes: 0, skipped: 0 };
/** A detachment whose save failed is tried again (by the next release request or maintenance tick) after this long. */
const STALLED_SAVE_MS = 10_000;
/** Recaptures after stale attempts before the view is left for maintenance to save. */
const RECAPTURES = 3;

/** What one capture may hold unless configured otherwise (a view bigger than this is not saved: quota_exceeded). */
export const DEFAULT_CAPTURE_LIMITS: CaptureLimits = { maxEntries: 200_000, maxBytes: 4 * 1024 ** 3 };

export interface MountServiceDeps {
  /** The actor runtime (known once it has started; effects run only after). */
  actors: () => ActorRuntime<any>;
  providers: ProviderRegistry;
  /** The allocation as its actor has it now (Services.allocation). */
  allocation(allocationId: string): Promise<AllocationContext>;
  packs: CheckpointPacks;
  directories: WorkspaceDirectories;
  limits: CaptureLimits;
  now: () => number;
  /** Where a directory checkpoint's duration is observed (a view's is measured from its events). */
  metrics: BerthMetrics;
}

export type MountView = ActorView<MountContext>;

type Head = { revision: number; tree: TreeManifest; id: string };

/** Workspace heads kept as stat hints, and the most entries (files) they hold together (a few MB of manifests). */
const HEADS_KEPT = 1024;
const HEAD_ENTRIES_KEPT = 50_000;

export class MountService {
  /** One preparation, refresh or pin at a time per workspace in this process. */
  private readonly locks = new Map<string, Promise<unknown>>();
  /** The last capture of each view (its stat hints make the next one incremental), by workspace and mount generation. */
  private readonly views = new Map<string, { generation: number; tree: TreeManifest }>();
  /**
   * The last capture of each workspace's directory (the same, for the head), the least recently used dropped first:
   * a manifest holds an entry per file, and kept for every workspace ever captured they added up without end.
   */
  private readonly heads = new BoundedLru<Head>(HEADS_KEPT, HEAD_ENTRIES_KEPT);

  constructor(private readonly deps: MountServiceDeps) {}

  async get(workspaceId: string): Promise<MountView | undefined> {
    const view = await this.deps.actors().get<MountContext>('mount', workspaceId);
    return view && view.state !== 'unbound' ? view : undefined;
  }

  /**
   * Holds the workspace's view on `target` for the execution `executionId` (before it is accepted): prepares it when
   * there is none (or the last one is detached or lost), first detaching an idle view on another allocation, brings it
   * to the head, and pins it. Answers the mount generation the execution records.
   */
  pin(workspace: WorkspaceContext, target: MountTarget, executionId: string): Promise<number> {
    return this.serialized(workspace.id, async () => {
      const deadline = Date.now() + SETTLE_WAIT_MS;
      for (;;) {
        const mount = await this.get(workspace.id);
        const state = String(mount?.state ?? 'unbound');
        if (state === 'preparing' || state === 'saving' || state === 'detaching') {
          await this.settled(workspace.id, deadline);
          continue;
        }
        if (state === 'active' && mount!.context.target!.allocationId !== target.allocationId) {
          // Rebinding first detaches the idle view (a pinned one keeps its allocation: busy).
          await this.detach(workspace.id, 'explicit');
          continue;
        }
        if (state !== 'active') {
          // The allocation holds one view (its staging volume): another workspace's idle view there is saved and let go.
          for (const other of await this.otherViewsOn(target.allocationId, workspace.id)) await this.detach(other, 'explicit');
          await this.prepare(workspace, target, (mount?.context.mountGeneration ?? 0) + 1);
          continue;
        }
        await this.refresh(workspace, mount!);
        await this.deps.actors().send('mount', workspace.id, { type: 'mount.pinned', executionId, at: this.deps.now() });
        return mount!.context.mountGeneration;
      }
    });
  }

  /** The view a pinned execution runs in, checked again at its submit: still active, same generation, same allocation. */
  async view(workspaceId: string, mountGeneration: number, allocationId: string, cwd: string): Promise<WorkspaceView> {
    const mount = await this.get(workspaceId);
    const c = mount?.context;
    if (mount?.state !== 'active' || c!.mountGeneration !== mountGeneration || c!.target?.allocationId !== allocationId) {
      throw new BerthError('workspace_unavailable', 'The workspace\'s view moved or went since the execution was accepted.', {
        workspaceId,
        reason: 'view_changed',
        state: String(mount?.state ?? 'unbound'),
        mountGeneration: c?.mountGeneration ?? null,
      });
    }
    return { source: '', cwd, hidden: [...HIDDEN_FROM_COMMANDS] };
  }

  /** Closes admission, publishes a final checkpoint and lets the view go (the allocation's use with it). */
  async detach(workspaceId: string, reason: 'explicit' | 'release'): Promise<MountView | undefined> {
    await this.requestDetach(workspaceId, reason);
    return this.settled(workspaceId, Date.now() + SETTLE_WAIT_MS);
  }

  /** The release's request (and maintenance's, every tick while the allocation is releasing): detach, or go on detaching. */
  async detachForRelease(workspaceId: string): Promise<void> {
    await this.requestDetach(workspaceId, 'release');
  }

  private async requestDetach(workspaceId: string, reason: 'explicit' | 'release'): Promise<void> {
    await this.dropDeadPins(workspaceId);
    try {
      await this.deps.actors().send('mount', workspaceId, { type: 'mount.detach_requested', reason, at: this.deps.now() });
    } catch (e) {
      if (!isBerthError(e, 'invalid_state') && !isBerthError(e, 'workspace_busy')) throw e;
      // Under way already: a save that failed (the view unreachable for a while) is tried again once it has stalled.
      const mount = await this.get(workspaceId);
      if (isBerthError(e, 'workspace_busy') && mount?.state === 'active') throw e; // pinned by a running execution
      if (mount && (mount.state === 'saving' || mount.state === 'detaching') && Object.values(mount.context.attempts).every((a) => a.status !== 'capturing')) {
        if (this.deps.now() - mount.context.updatedAt >= STALLED_SAVE_MS) await this.redrive(workspaceId);
      }
    }
  }

  /** What recovery does for the view (resume its save or detachment), asked again by this runtime. */
  private redrive(workspaceId: string): Promise<unknown> {
    const actors = this.deps.actors();
    return actors.send('mount', workspaceId, { type: 'runtime.recovered', runtimeId: actors.runtimeId, epoch: actors.epoch, at: this.deps.now() }).catch(() => undefined);
  }

  /**
   * The checkpoint of an execution's view (its attempt id is the execution id): started once, resumed by recovery,
   * answered from the mount's record once it has an outcome. A stale attempt is followed by a recapture of the view
   * (so the command's changes are not lost, though the execution stays unsaved). The pin goes with it.
   */
  async checkpointExecution(p: CheckpointParams): Promise<DomainEvent> {
    const at = () => this.deps.now();
    const attemptId = p.executionId;
    let mount = await this.get(p.workspaceId);
    if (mount && !(attemptId in mount.context.attempts) && mount.state === 'active' && mount.context.mountGeneration === p.mountGeneration) {
      const started = await this.start(p.workspaceId, attemptId, 'execution', p.executionId).catch((e) => {
        if (isBerthError(e)) return undefined;
        throw e;
      });
      if (started) mount = started;
    }
    const attempt = mount ? await this.outcome(p.workspaceId, attemptId) : undefined;
    if (attempt?.status === 'stale') await this.recapture(p.workspaceId);
    await this.deps.actors().send('mount', p.workspaceId, { type: 'mount.unpinned', executionId: p.executionId, at: at() }).catch(() => undefined);
    // No view to save (it was lost with its allocation, or detached): nothing of the command could be captured.
    if (!attempt) return { type: 'execution.checkpointed', outcome: 'failed', attemptId, code: 'workspace_unavailable', at: at() };
    return {
      type: 'execution.checkpointed',
      outcome: attempt.status === 'published' ? 'published' : attempt.status === 'stale' ? 'stale' : 'failed',
      attemptId,
      ...(attempt.checkpointId ? { checkpointId: attempt.checkpointId } : {}),
      ...(attempt.revision ? { revision: attempt.revision } : {}),
      at: at(),
    };
  }

  /** An explicit checkpoint of the view: recorded, captured and published (or stale_version when the head moved). */
  async checkpoint(workspaceId: string, attemptId: string): Promise<Attempt> {
    await this.start(workspaceId, attemptId, 'explicit');
    const attempt = await this.outcome(workspaceId, attemptId);
    if (attempt.status === 'stale') throw new BerthError('stale_version', 'The head moved while the checkpoint was taken: nothing was published.', { workspaceId, attemptId, reason: 'stale_checkpoint' });
    if (attempt.status === 'failed') throw new BerthError('workspace_unavailable', 'The view could not be captured.', { workspaceId, attemptId, reason: 'capture_failed' });
    return attempt;
  }

  /**
   * A checkpoint of the workspace's directory itself (no view elsewhere holds newer files: none is active, or the
   * provider binds the directory): captured and published on the head it was taken at, else stale_version.
   */
  async checkpointDirectory(workspace: WorkspaceContext, attemptId: string): Promise<{ checkpointId: string; revision: number }> {
    const started = performance.now();
    let result: 'published' | 'stale' | 'failed' = 'failed';
    try {
      const head = await this.directoryNow(workspace);
      const attempt = { reason: 'explicit' as const, baseRevision: head.revision };
      const published = await this.publish(workspace.id, attemptId, attempt, head);
      result = published === 'stale' ? 'stale' : 'published';
      if (published === 'stale') throw new BerthError('stale_version', 'The head moved while the checkpoint was taken: nothing was published.', { workspaceId: workspace.id, attemptId, reason: 'stale_checkpoint' });
      this.keepHead(workspace.id, { revision: published.revision, tree: head.tree, id: head.id });
      return published;
    } finally {
      observeDirectoryCheckpoint(this.deps.metrics, result, (performance.now() - started) / 1000);
    }
  }

  private keepHead(workspaceId: string, head: Head): void {
    this.heads.set(workspaceId, head, head.tree.entries.length + 1);
  }

  /** A stored tree (a checkpoint's, a view's). */
  tree(id: string): Promise<TreeManifest> {
    return this.deps.packs.loadManifest(id);
  }

  /** Makes the workspace's directory the tree `target` (from what it holds now); answers what changed. */
  async restoreDirectory(workspace: WorkspaceContext, target: TreeManifest): Promise<TreeChange[]> {
    const head = await this.directoryNow(workspace);
    await (await this.directoryHost(workspace)).apply(target, head.tree, this.deps.packs.source());
    return diffTrees(head.tree, target);
  }

  // ---- effects (src/runtime/workspaces/mount.actor.ts) ----

  /** Takes the allocation's use (giving the left one's back), then fills the fresh view with the head's tree. */
  async materialize(p: MaterializeParams): Promise<MountEvent> {
    const at = () => this.deps.now();
    crashAt('mount.materializing'); // recovery tests: the preparation is recorded, nothing is made yet
    try {
      if (p.previousAllocationId) await this.giveBack(p.previousAllocationId, p.workspaceId);
      await this.deps.actors().send('allocation', p.target.allocationId, { type: 'allocation.use_acquired', useId: p.workspaceId, kind: 'mount', at: at() });
      const host = await this.fileHostOf(p.target);
      const tree = await this.deps.packs.loadManifest(p.base.manifest);
      await host.apply(tree, undefined, this.deps.packs.source());
      this.views.delete(p.workspaceId);
      return { type: 'mount.prepared', at: at() };
    } catch (e) {
      if (!isBerthError(e) && !isSystemError(e)) throw e;
      return { type: 'mount.prepare_failed', code: isBerthError(e) ? e.code : 'internal', message: (e as Error).message, at: at() };
    }
  }

  /** Runs the attempts named (each: capture the view, carry its changes to the directory, publish if on the head). */
  async capture(p: CaptureParams): Promise<MountEvent[]> {
    const mount = await this.get(p.workspaceId);
    if (!mount) return [];
    return Promise.all(p.attemptIds.map((id) => this.runAttempt(mount, id)));
  }

  /** The final attempt of a detachment, against the head as it is now. */
  async beginSave(p: BeginSaveParams): Promise<MountEvent | undefined> {
    const mount = await this.get(p.workspaceId);
    const workspace = await this.workspace(p.workspaceId);
    if (!mount || !workspace || !mount.context.target) return undefined;
    const count = Object.values(mount.context.attempts).filter((a) => a.reason === 'detach' || a.reason === 'recapture').length;
    return this.startedEvent(mount.context, workspace, `detach-${mount.context.mountGeneration}-${count + 1}`, count === 0 ? 'detach' : 'recapture');
  }

  /** Empties the saved view (the allocation may next hold another workspace's), then gives the allocation's use back. */
  async unuse(p: UnuseParams): Promise<MountEvent> {
    const { base, target } = (await this.get(p.workspaceId))?.context ?? {};
    if (base && target) {
      await this.fileHostOf(target)
        .then(async (view) => view.apply(EMPTY_TREE, await this.deps.packs.loadManifest(base.manifest), this.deps.packs.source()))
        .catch((e) => {
          if (!isBerthError(e)) throw e; // the view is gone with its allocation: nothing to empty
        });
    }
    await this.giveBack(p.allocationId, p.workspaceId);
    this.views.delete(p.workspaceId);
    return { type: 'mount.detached', at: this.deps.now() };
  }

  // ---- inside ----

  private async prepare(workspace: WorkspaceContext, target: MountTarget, mountGeneration: number): Promise<void> {
    const head = await this.headTree(workspace);
    await this.deps.actors().send('mount', workspace.id, {
      type: 'mount.prepare_requested',
      scope: workspace.scope,
      target,
      mountGeneration,
      base: { revision: head.revision, manifest: head.id },
      at: this.deps.now(),
    });
    const settled = await this.settled(workspace.id, Date.now() + SETTLE_WAIT_MS);
    if (settled?.state !== 'active') {
      throw new BerthError('workspace_unavailable', 'The workspace\'s view could not be made on the allocation.', { workspaceId: workspace.id, reason: 'prepare_failed', problem: settled?.context.problem ?? null });
    }
  }

  /** Brings an active view to the head when files changed in the directory since (tool edits, native commands). */
  private async refresh(workspace: WorkspaceContext, mount: MountView): Promise<void> {
    const base = mount.context.base!;
    if (base.revision >= workspace.revision) return;
    const head = await this.headTree(workspace);
    const host = await this.fileHostOf(mount.context.target!);
    await host.apply(head.tree, await this.viewTree(mount.context), this.deps.packs.source());
    this.views.delete(workspace.id);
    const next: ViewBase = { revision: head.revision, manifest: head.id };
    await this.deps.actors().send('mount', workspace.id, { type: 'mount.refreshed', base: next, at: this.deps.now() });
  }

  private async start(workspaceId: string, attemptId: string, reason: 'execution' | 'explicit' | 'recapture', executionId?: string): Promise<MountView> {
    const mount = await this.get(workspaceId);
    const workspace = await this.workspace(workspaceId);
    if (!mount || mount.state !== 'active' || !workspace) {
      throw new BerthError('workspace_unavailable', 'The workspace has no active view to checkpoint.', { workspaceId, reason: String(mount?.state ?? 'unbound') });
    }
    await this.deps.actors().send('mount', workspaceId, this.startedEvent(mount.context, workspace, attemptId, reason, executionId));
    return (await this.get(workspaceId))!;
  }

  private startedEvent(mount: MountContext, workspace: WorkspaceContext, attemptId: string, reason: Attempt['reason'], executionId?: string): MountEvent {
    return {
      type: 'mount.checkpoint_started',
      attemptId,
      reason,
      ...(executionId ? { executionId } : {}),
      bindingGeneration: workspace.generation,
      target: mount.target!,
      mountGeneration: mount.mountGeneration,
      baseRevision: workspace.revision,
      at: this.deps.now(),
    };
  }

  /** After a stale attempt: a new one captures the current view on the current head. */
  private async recapture(workspaceId: string): Promise<void> {
    for (let i = 1; i <= RECAPTURES; i++) {
      const mount = await this.get(workspaceId);
      if (mount?.state !== 'active') return; // a detachment's own save takes over
      const id = `recapture-${mount.context.mountGeneration}-${Object.keys(mount.context.attempts).length + 1}`;
      const started = await this.start(workspaceId, id, 'recapture').catch(() => undefined);
      if (!started) return;
      if ((await this.outcome(workspaceId, id)).status !== 'stale') return;
    }
  }

  private async runAttempt(mount: MountView, attemptId: string): Promise<MountEvent> {
    const at = () => this.deps.now();
    const attempt = mount.context.attempts[attemptId];
    const workspace = await this.workspace(mount.context.workspaceId);
    if (!attempt || !workspace) return { type: 'mount.checkpoint_failed', attemptId, code: 'workspace_unavailable', message: 'The workspace is gone.', at: at() };
    const done = workspace.published[attemptId];
    crashAt('mount.capturing'); // the attempt is recorded, nothing captured yet
    try {
      if (workspace.generation !== attempt.bindingGeneration) {
        throw new BerthError('workspace_unavailable', 'The workspace was rebound since the attempt began.', { reason: 'generation_mismatch' });
      }
      const target = mount.context.target!;
      const view = await this.fileHostOf(target);
      const before = await this.viewTree(mount.context);
      const captured = await this.captureInto(view, before);
      this.views.set(workspace.id, { generation: mount.context.mountGeneration, tree: captured.tree });
      const directory = await this.directoryHost(workspace);
      const base = await this.deps.packs.loadManifest(mount.context.base!.manifest);
      // The command's changes (base → captured) go into the directory; what else changed there is kept.
      await directory.apply(captured.tree, base, this.deps.packs.source());
      crashAt('mount.applied'); // the command's changes are in the directory, the checkpoint is not published
      let tree = captured;
      if (mount.context.base!.revision !== attempt.baseRevision) {
        // The view was behind the head: the directory now holds both, and the view is given the merged tree.
        const merged = await this.captureInto(directory, this.heads.get(workspace.id)?.tree);
        await view.apply(merged.tree, captured.tree, this.deps.packs.source());
        this.views.delete(workspace.id);
        tree = merged;
      }
      if (done) return { type: 'mount.checkpoint_published', attemptId, checkpointId: done.checkpointId, revision: done.revision, view: { revision: done.revision, manifest: tree.id }, at: at() };
      const revision = await this.publish(workspace.id, attemptId, attempt, tree);
      if (revision === 'stale') return { type: 'mount.checkpoint_stale', attemptId, head: (await this.workspace(workspace.id))?.revision ?? 0, at: at() };
      this.keepHead(workspace.id, { revision: revision.revision, tree: tree.tree, id: tree.id });
      return { type: 'mount.checkpoint_published', attemptId, checkpointId: revision.checkpointId, revision: revision.revision, view: { revision: revision.revision, manifest: tree.id }, at: at() };
    } catch (e) {
      // A filesystem fault (EIO, ENOSPC on the data directory) fails the attempt too: left open, it would be waited on.
      if (!isBerthError(e) && !isSystemError(e)) throw e;
      return { type: 'mount.checkpoint_failed', attemptId, code: isBerthError(e) ? e.code : 'internal', message: (e as Error).message, at: at() };
    }
  }

  private async publish(
    workspaceId: string,
    attemptId: string,
    attempt: Pick<Attempt, 'reason' | 'baseRevision' | 'executionId'> & { mountGeneration?: number },
    tree: { id: string; tree: TreeManifest },
  ): Promise<{ revision: number; checkpointId: string } | 'stale'> {
    try {
      const sent = await this.deps.actors().send<WorkspaceContext>('workspace', workspaceId, {
        type: 'workspace.checkpoint_published',
        attemptId,
        checkpointId: tree.id,
        baseRevision: attempt.baseRevision,
        reason: attempt.reason,
        ...(attempt.executionId ? { executionId: attempt.executionId } : {}),
        ...(attempt.mountGeneration !== undefined ? { mountGeneration: attempt.mountGeneration } : {}),
        files: tree.tree.files,
        bytes: tree.tree.bytes,
        at: this.deps.now(),
      });
      return sent.context.published[attemptId]!;
    } catch (e) {
      if (isBerthError(e, 'stale_version')) return 'stale';
      // Published by an earlier try whose answer was lost: the same result.
      if (isBerthError(e, 'invalid_state') && e.detail.reason === 'already_published') {
        return { revision: Number(e.detail.revision), checkpointId: String(e.detail.checkpointId) };
      }
      throw e;
    }
  }

  /** A capture of `host` into a new pack, made durable with its manifest (stored as changes when few since `previous`). */
  private async captureInto(host: FileHost, previous: TreeManifest | undefined): Promise<{ id: string; tree: TreeManifest }> {
    const pack = await this.deps.packs.writer();
    let tree: TreeManifest;
    try {
      tree = await host.capture(previous, pack, this.deps.limits);
      await pack.finish();
    } catch (e) {
      await pack.abort();
      throw e;
    }
    return { id: await this.deps.packs.saveManifest(tree, previous), tree };
  }

  /** The head's tree: the published checkpoint's when nothing changed since, else a capture of the directory. */
  async headTree(workspace: WorkspaceContext): Promise<{ revision: number; id: string; tree: TreeManifest }> {
    const cached = this.heads.get(workspace.id);
    if (cached?.revision === workspace.revision) return { revision: workspace.revision, id: cached.id, tree: cached.tree };
    if (workspace.checkpoint?.revision === workspace.revision) {
      const tree = await this.deps.packs.loadManifest(workspace.checkpoint.id);
      this.keepHead(workspace.id, { revision: workspace.revision, tree, id: workspace.checkpoint.id });
      return { revision: workspace.revision, id: workspace.checkpoint.id, tree };
    }
    const captured = await this.directoryNow(workspace);
    this.keepHead(workspace.id, { revision: workspace.revision, tree: captured.tree, id: captured.id });
    return captured;
  }

  /**
   * What the directory holds now, captured (the cached head serves as stat hints only): a native command writes the
   * directory itself and its changes reach the head's revision only once recorded after it ends, so a head cached at
   * this revision may miss them.
   */
  private async directoryNow(workspace: WorkspaceContext): Promise<{ revision: number; id: string; tree: TreeManifest }> {
    const captured = await this.captureInto(await this.directoryHost(workspace), this.heads.get(workspace.id)?.tree);
    return { revision: workspace.revision, ...captured };
  }

  private async directoryHost(workspace: WorkspaceContext): Promise<DirectoryFileHost> {
    const placed = await this.deps.directories.place(workspace);
    return new DirectoryFileHost(placed.root, workspace.kind === 'managed' ? this.deps.directories.owner : undefined);
  }

  /** What the view holds: its last capture (with its stat hints) or the tree it was last brought to. */
  private async viewTree(mount: MountContext): Promise<TreeManifest> {
    const cached = this.views.get(mount.workspaceId);
    if (cached?.generation === mount.mountGeneration) return cached.tree;
    return this.deps.packs.loadManifest(mount.base!.manifest);
  }

  private async outcome(workspaceId: string, attemptId: string): Promise<Attempt> {
    let found: Attempt | undefined;
    await waitUntil(async () => {
      const mount = await this.get(workspaceId);
      found = mount?.context.attempts[attemptId];
      return found === undefined || found.status !== 'capturing' || mount!.state === 'unavailable';
    }, Date.now() + SETTLE_WAIT_MS, 50);
    if (!found) throw new BerthError('workspace_unavailable', 'The attempt is not recorded.', { workspaceId, attemptId });
    return found;
  }

  private async settled(workspaceId: string, deadline: number): Promise<MountView | undefined> {
    let view: MountView | undefined;
    await waitUntil(async () => {
      view = await this.get(workspaceId);
      const state = String(view?.state ?? 'unbound');
      return state !== 'preparing' && state !== 'saving' && state !== 'detaching';
    }, deadline, 50);
    return view;
  }

  /** Workspaces other than `workspaceId` whose view is on the allocation (their mount uses of it). */
  private async otherViewsOn(allocationId: string, workspaceId: string): Promise<string[]> {
    const { uses } = await this.deps.allocation(allocationId);
    return Object.keys(uses).filter((id) => id !== workspaceId && uses[id]!.kind === 'mount');
  }

  /** Pins of executions that will never reach their checkpoint (never accepted, or finished): dropped. */
  private async dropDeadPins(workspaceId: string): Promise<void> {
    const mount = await this.get(workspaceId);
    for (const executionId of mount?.context.pins ?? []) {
      const x = await this.deps.actors().get<ExecutionContext>('execution', executionId);
      const state = String(x?.state ?? 'pristine');
      if (state === 'pristine' || state === 'released' || state === 'closing' || state === 'compacted' || state === 'saved') {
        await this.deps.actors().send('mount', workspaceId, { type: 'mount.unpinned', executionId, at: this.deps.now() }).catch(() => undefined);
      }
    }
  }

  private async giveBack(allocationId: string, workspaceId: string): Promise<void> {
    await this.deps.actors().send('allocation', allocationId, { type: 'allocation.use_released', useId: workspaceId, at: this.deps.now() }).catch((e) => {
      // Not held any more (given back before a crash), or the allocation is finished: nothing to give back.
      if (!isBerthError(e)) throw e;
    });
  }

  private async fileHostOf(target: MountTarget): Promise<FileHost> {
    const allocation = await this.deps.allocation(target.allocationId);
    const provider = this.deps.providers.get(allocation.profile.provider);
    if (!provider.fileHost) throw new BerthError('workspace_unavailable', 'The provider keeps no workspace view.', { reason: 'no_file_host' });
    const ref: AllocationRef = {
      requestId: allocation.requestId,
      allocationId: allocation.id,
      environmentId: allocation.environmentId,
      // A provider that forwards the call (remote) finds the allocation's host by its profile and is fenced by its generation.
      generation: allocation.generation,
      profile: allocation.profile,
      ...(allocation.identity ? { identity: allocation.identity } : {}),
    };
    return provider.fileHost(ref);
  }

  private async workspace(id: string): Promise<WorkspaceContext | undefined> {
    const view = await this.deps.actors().get<WorkspaceContext>('workspace', id);
    return view && view.state !== 'pristine' ? view.context : undefined;
  }

  private serialized<T>(key: string, run: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(key) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.catch(() => undefined);
    this.locks.set(key, settled);
    void settled.finally(() => {
      if (this.locks.get(key) === settled) this.locks.delete(key);
    });
    return next;
  }
}

/** An error of a system call (fs and the like carry an errno code such as EIO). */
const isSystemError = (e: unknown): boolean => e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string' && /^E[A-Z]+$/.test((e as NodeJS.ErrnoException).code!);
