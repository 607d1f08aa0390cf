/**
 * Tool turns (issue 13, seed 004): a turn holds its workspace's storage for its whole life, reads included, so turns
 * on one storage run one after another and turns on different storages side by side. Opening refuses a stale binding
 * or a missing or linked session directory before it claims anything; every call re-checks the turn, its holding
 * and the root; release closes the gate, waits until no admitted call runs, records what the turn's shell commands
 * changed, then gives the storage back on the condition that this turn still holds it. Nothing here takes a storage
 * over on a timer: a crash or an unknown outcome leaves it held, and only an admin clears it, with evidence.
 */
import { createHash, randomUUID } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import { MAX_CHANGES_PER_EVENT } from '../../../schemas/events/workspace.ts';
import { splitRelativePath } from '../../content/content-path.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { ExecutionContext } from '../../machines/execution.machine.ts';
import type { OwnershipContext } from '../../machines/ownership.machine.ts';
import type { SessionContext } from '../../machines/session.machine.ts';
import type { TurnContext } from '../../machines/turn.machine.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { inScope, type Caller } from '../caller.ts';
import { isMember } from '../role-policy.ts';
import { TurnFiles } from './turn-files.ts';
import type { WorkspaceDirectories } from './workspace-directories.ts';
import type { FileChange } from './workspace-files.ts';
import { diffManifests, manifestOf, type Manifest } from './workspace-manifest.ts';
import { storageKey } from './workspace-roots.ts';
import type { WorkspaceService } from './workspace-service.ts';

const TURN_ID = /^htrn_[0-9a-f]{32}$/;
/** Statuses after which an execution runs no more; `unknown` is not among them for a release (nothing proves it stopped). */
const STOPPED = new Set(['exited', 'cancelled', 'failed']);
/**
 * How often a waiting acquisition looks again, for a holder of another runtime (a release in this one wakes it at
 * once): from the first to the last, doubling, so a long wait costs a look every few seconds.
 */
const BUSY_POLL_FIRST_MS = 250;
const BUSY_POLL_LAST_MS = 4_000;
/** Acquisitions one scope may have waiting at once; past it the answer is workspace_busy without a wait. */
export const WAITERS_PER_SCOPE = 64;
const RELEASE_WAIT_DEFAULT_MS = 30_000;

export const turnIdOf = (scope: string, key: string): string => `htrn_${createHash('sha256').update(`${scope}\0turn\0${key}`).digest('hex').slice(0, 32)}`;

/** A turn as callers see it. */
export interface TurnView {
  id: string;
  object: 'turn';
  sessionId: string;
  workspaceId: string;
  state: 'open' | 'closing' | 'released';
  executions: { executionId: string; recorded: boolean }[];
  cleared: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface TurnServiceDeps {
  actors: ActorRuntime<any>;
  workspaces: WorkspaceService;
  directories: WorkspaceDirectories;
  artifacts: ArtifactStore;
  /** The caller's session (not_found when absent, deleted or another scope's). */
  session(caller: Caller, id: string): Promise<SessionContext>;
  /** An execution's status, waiting up to waitMs for it to settle; undefined when it was never accepted. */
  execution(caller: Caller, id: string, waitMs: number): Promise<{ status: string } | undefined>;
  /** Resolves true once the execution settles, false when the runtime stops first. */
  settled(executionId: string): Promise<boolean>;
  /** Throws storage_full for a member while the data directory is under its reserve (a look of now). */
  storageRoom(caller: Caller): Promise<void>;
  now: () => number;
}

/**
 * Calls admitted and not finished, per turn, in this process: release closes it (no call enters after that, even
 * one whose admission checks were still under way) and waits for the running ones.
 */
class Gate {
  private running = 0;
  private idle: (() => void)[] = [];
  closed = false;
  enter(): void {
    this.running++;
  }
  leave(): void {
    if (--this.running === 0) for (const wake of this.idle.splice(0)) wake();
  }
  get busy(): boolean {
    return this.running > 0;
  }
  drained(): Promise<void> {
    return this.running === 0 ? Promise.resolve() : new Promise((resolve) => this.idle.push(resolve));
  }
}

export class TurnService {
  private readonly gates = new Map<string, Gate>();
  /** Acquisitions waiting for a storage this runtime holds, woken by its release. */
  private readonly waiting = new Map<string, Set<() => void>>();
  /** Waiting acquisitions per scope (bounded: WAITERS_PER_SCOPE). */
  private readonly waitersOf = new Map<string, number>();
  /** One recording of shell changes at a time per turn (a watcher and a release may both try). */
  private readonly recording = new Map<string, Promise<void>>();

  constructor(private readonly deps: TurnServiceDeps) {}

  /**
   * Opens a turn on the session's workspace: the binding and the session directory are checked before the storage
   * is claimed. `key` makes it idempotent (the same key answers the same turn); `waitMs` waits for a busy storage.
   */
  async open(caller: Caller, sessionId: string, opts: { key?: string; waitMs?: number } = {}): Promise<TurnView> {
    const session = await this.deps.session(caller, sessionId);
    // The turn is the session's scope's (an admin acting across scopes opens it there, not in `*`).
    const turnId = opts.key !== undefined ? turnIdOf(session.scope, opts.key) : turnIdOf(session.scope, `${sessionId}\0${randomUUID()}`);
    // Only a caller's key can name a turn that exists already.
    const existing = opts.key !== undefined ? await this.deps.actors.get<TurnContext>('turn', turnId) : undefined;
    if (existing && existing.state !== 'pristine') {
      if (existing.context.sessionId !== sessionId) throw new BerthError('invalid_request', 'That turn key belongs to another session.', { sessionId });
      if (existing.state === 'released') throw new BerthError('invalid_state', 'The turn is released; a released turn is never reopened.', { turnId, reason: 'released' });
      return viewOf(existing);
    }
    const workspace = await this.boundWorkspace(caller, session, sessionId);
    await this.sessionDirectory(workspace, session.cwd);
    const ownership = storageKey(workspace.scope, workspace.storageId);
    const claim = { holder: turnId, sessionId, workspaceId: workspace.id, scope: workspace.scope };
    const opened = { type: 'turn.opened', scope: session.scope, sessionId, workspaceId: workspace.id, generation: workspace.generation, ownership } as const;
    // A storage free here is claimed in the same group commit as the turn is recorded (one commit for the open, not
    // two). Only for a turn without the caller's key: a claim lost to a racing holder burns the turn (released at
    // once, never admitting a call: a call checks its turn holds the storage), and a key must stay usable.
    if (opts.key === undefined && !(await this.deps.actors.get<OwnershipContext>('ownership', ownership))?.context.holder) {
      const [claimed, recorded] = await Promise.allSettled([
        this.acquire(ownership, claim, 0),
        this.deps.actors.send<TurnContext>('turn', turnId, { ...opened, at: this.deps.now() }),
      ]);
      if (claimed.status === 'fulfilled' && recorded.status === 'fulfilled') {
        await this.recheck(workspace, session.cwd, () => Promise.all([this.giveBack(ownership, turnId), this.finish(turnId, false).catch(ignoreRefusal)]));
        return viewOf(recorded.value);
      }
      if (claimed.status === 'fulfilled') await this.giveBack(ownership, turnId);
      if (recorded.status === 'fulfilled') await this.finish(turnId, false).catch(ignoreRefusal);
      const lost = claimed.status === 'rejected' ? claimed.reason : (recorded as PromiseRejectedResult).reason;
      // Taken meanwhile by another turn: a caller who would wait opens a fresh turn the usual way below.
      if (!(isBerthError(lost, 'workspace_busy') && (opts.waitMs ?? 0) > 0)) throw lost;
      return this.open(caller, sessionId, { ...opts, key: `${sessionId}\0${randomUUID()}` });
    }
    await this.acquire(ownership, claim, Date.now() + Math.max(0, opts.waitMs ?? 0));
    // Checked again before the turn is recorded, so that a key stays usable: the turn is recorded only once it holds.
    await this.recheck(workspace, session.cwd, () => this.giveBack(ownership, turnId));
    const sent = await this.deps.actors.send<TurnContext>('turn', turnId, { ...opened, at: this.deps.now() }).catch(async (e) => {
      // No turn to hold it: the storage goes back (a crash right here leaves it to a retry with the key, or a clear).
      await this.giveBack(ownership, turnId);
      throw e;
    });
    return viewOf(sent);
  }

  /** The session directory checked again once the storage is held (it may have gone meanwhile); `undo` when it has. */
  private async recheck(workspace: WorkspaceContext, cwd: string, undo: () => Promise<unknown>): Promise<void> {
    try {
      await this.sessionDirectory(workspace, cwd);
    } catch (e) {
      await undo();
      throw e;
    }
  }

  async get(caller: Caller, sessionId: string, turnId: string): Promise<TurnView> {
    return viewOf(await this.turn(caller, sessionId, turnId));
  }

  /**
   * Closes the gate (nothing new is admitted), waits up to `waitMs` for admitted calls, records the shell commands'
   * changes and gives the storage back. A released turn answers as it is (a lost answer is retried safely). A call
   * still running at the deadline is `workspace_busy` (retry the release); an execution whose outcome is unknown
   * keeps the storage held (`invalid_state`, reason unknown_outcome): only an admin's clear, with evidence, frees it.
   */
  async release(caller: Caller, sessionId: string, turnId: string, opts: { waitMs?: number } = {}): Promise<TurnView> {
    let turn = await this.turn(caller, sessionId, turnId);
    // Released, perhaps by a release whose storage answer was lost: the storage is given back if it still holds it.
    if (turn.state === 'released') return this.giveBack(turn.context.ownership, turnId).then(() => viewOf(turn));
    const gate = this.gateOf(turnId);
    gate.closed = true; // from here no call is admitted in this process (the durable fact follows when there is a wait)
    const deadline = Date.now() + Math.max(0, opts.waitMs ?? RELEASE_WAIT_DEFAULT_MS);
    if (turn.state === 'open' && (gate.busy || turn.context.executions.length > 0)) {
      // A concurrent release may have closed it first: then it is read as that one left it.
      const closed = await this.deps.actors.send<TurnContext>('turn', turnId, { type: 'turn.closing', at: this.deps.now() }).catch(ignoreRefusal);
      turn = closed ? { ...turn, state: closed.state, context: closed.context } : await this.turn(caller, sessionId, turnId);
    }
    if (gate.busy) {
      await Promise.race([gate.drained(), sleep(Math.max(0, deadline - Date.now()))]);
      if (gate.busy) throw new BerthError('workspace_busy', 'Calls of the turn are still running; release again.', { turnId, reason: 'calls_running' });
      turn = await this.turn(caller, sessionId, turnId); // the calls may have admitted executions meanwhile
    }
    const running: string[] = [];
    const unknown: string[] = [];
    for (const x of turn.context.executions) {
      const record = await this.deps.execution(caller, x.executionId, Math.max(0, deadline - Date.now()));
      if (!record || STOPPED.has(record.status)) continue;
      (record.status === 'unknown' ? unknown : running).push(x.executionId);
    }
    if (unknown.length > 0) {
      throw new BerthError('invalid_state', 'An execution of the turn has an unknown outcome: the storage stays held until an admin clears it with evidence.', {
        turnId,
        reason: 'unknown_outcome',
        executions: unknown,
      });
    }
    if (running.length > 0) throw new BerthError('workspace_busy', 'Executions of the turn are still running; release again.', { turnId, reason: 'calls_running', executions: running });
    await this.recordShellChanges(turn.context);
    // The storage and the turn together (one group commit): whichever lands without the other is finished by a
    // retried release (a released turn still gives its storage back; a freed one is not_holder).
    const finished = this.finish(turnId, false).catch(async (e) => {
      // Released by a concurrent release meanwhile: answered as released.
      const now = isBerthError(e, 'invalid_state') ? await this.turn(caller, sessionId, turnId) : undefined;
      if (now?.state !== 'released') throw e;
      return viewOf(now);
    });
    const [, released] = await Promise.all([this.giveBack(turn.context.ownership, turnId), finished]);
    return released;
  }

  /**
   * Runs one file tool call in the turn: admitted only while the turn is open, it still holds its storage and the
   * root is the one recorded; the gate counts it until it returns. Mutations are recorded in the workspace history.
   */
  async tool<T>(caller: Caller, sessionId: string, turnId: string, tool: FileTool, call: (files: TurnFiles, workspace: WorkspaceContext) => Promise<ToolResult<T>>): Promise<T> {
    // Counted from before its admission checks: a release that closes the gate meanwhile waits for it, or it is refused.
    const gate = this.gateOf(turnId);
    gate.enter();
    let settled: Promise<unknown> | undefined;
    try {
      const { turn, workspace } = await this.admitted(caller, sessionId, turnId, gate);
      const placed = await this.deps.directories.place(workspace);
      const owner = workspace.kind === 'managed' ? this.deps.directories.owner : undefined;
      const result = await call(new TurnFiles(placed, owner, () => this.deps.storageRoom(caller)), workspace);
      settled = result.settled;
      if (result.changes.length > 0) {
        await this.deps.actors.send('workspace', turn.workspaceId, {
          type: 'workspace.files_changed',
          turnId,
          tool,
          ...(result.checkpointId ? { checkpointId: result.checkpointId } : {}),
          changes: result.changes.slice(0, MAX_CHANGES_PER_EVENT),
          ...(result.changes.length > MAX_CHANGES_PER_EVENT ? { truncated: true } : {}),
          at: this.deps.now(),
        });
      }
      return result.value;
    } finally {
      const leave = () => gate.leave();
      if (settled) void settled.then(leave, leave);
      else leave();
    }
  }

  /**
   * Admits a shell execution into the turn (before it is accepted): its cwd (the session's, then the one given, both
   * relative) must be a directory of the workspace reached without a link; the manifest taken now is what its
   * changes are measured against when it ends. Answers what the execution records and its environment.
   */
  async admitExecution(
    caller: Caller,
    sessionId: string,
    turnId: string,
    executionId: string,
    cwd: string | undefined,
  ): Promise<{ workspaceId: string; cwd: string; environmentId: string | null }> {
    const gate = this.gateOf(turnId);
    gate.enter();
    try {
      const { turn, workspace, session } = await this.admitted(caller, sessionId, turnId, gate);
      if (turn.executions.some((x) => x.executionId === executionId)) {
        return { workspaceId: workspace.id, cwd: joinCwd(session.cwd, cwd), environmentId: session.environmentId };
      }
      const placed = await this.deps.directories.place(workspace);
      const relative = joinCwd(session.cwd, cwd);
      await new TurnFiles(placed).directory(relative);
      const manifest = await manifestOf(placed.root);
      const ref = await this.deps.artifacts.putBytes(Buffer.from(JSON.stringify(manifest)));
      await this.deps.actors.send('turn', turnId, { type: 'turn.execution_admitted', executionId, manifest: `${ref.digest}/${ref.size}`, at: this.deps.now() });
      return { workspaceId: workspace.id, cwd: relative, environmentId: session.environmentId };
    } finally {
      gate.leave();
    }
  }

  /** Once an admitted execution settles, its changes go to the history (release does it too, whichever is first). */
  async recordWhenSettled(turnId: string, executionId: string): Promise<void> {
    if (!(await this.deps.settled(executionId))) return;
    const turn = await this.deps.actors.get<TurnContext>('turn', turnId);
    if (turn && turn.state !== 'released') await this.recordShellChanges(turn.context);
  }

  /**
   * The admin's clear of a storage whose holder cannot release (its runtime crashed, a client vanished): allowed
   * only when every execution of the holder is proven stopped (terminal, none unknown or running) and none of its
   * calls runs here. Otherwise `invalid_state` names what blocks it.
   */
  async clear(caller: Caller, workspaceId: string): Promise<{ cleared: string | null }> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Clearing a storage\'s holder needs an admin token.', { role: caller.role });
    const workspace = await this.deps.workspaces.context(caller, workspaceId);
    const key = storageKey(workspace.scope, workspace.storageId);
    const ownership = (await this.deps.actors.get<OwnershipContext>('ownership', key))?.context;
    const holder = ownership?.holder;
    if (!holder) return { cleared: null };
    const turn = await this.deps.actors.get<TurnContext>('turn', holder.turnId);
    const evidence: { executionId: string; status: string }[] = [];
    const blocking: { executionId: string; status: string }[] = [];
    for (const x of turn?.context.executions ?? []) {
      const record = await this.deps.execution(caller, x.executionId, 0);
      const status = record?.status ?? 'never_accepted';
      (record && !STOPPED.has(status) ? blocking : evidence).push({ executionId: x.executionId, status });
    }
    if (this.gates.get(holder.turnId)?.busy) blocking.push({ executionId: '', status: 'tool_call_running' });
    if (blocking.length > 0) {
      throw new BerthError('invalid_state', 'The holder\'s work is not proven stopped: the storage stays held.', { workspaceId, reason: 'holder_running', blocking });
    }
    await this.deps.actors.send('ownership', key, { type: 'ownership.cleared', holder: holder.turnId, executions: evidence, at: this.deps.now() });
    this.wake(key);
    if (turn && turn.state !== 'released' && turn.state !== 'pristine') await this.finish(holder.turnId, true);
    return { cleared: holder.turnId };
  }

  /** The turn in the caller's scope and of that session (else not_found: another scope's turn does not exist). */
  private async turn(caller: Caller, sessionId: string, turnId: string): Promise<ActorView<TurnContext>> {
    const view = TURN_ID.test(turnId) ? await this.deps.actors.get<TurnContext>('turn', turnId) : undefined;
    if (!view || view.state === 'pristine' || !inScope(caller, view.context.scope) || view.context.sessionId !== sessionId) {
      throw new BerthError('not_found', 'No such turn.', { turnId });
    }
    return view;
  }

  /** What every call re-checks: the turn is open, still holds its storage, and its binding still matches. */
  private async admitted(caller: Caller, sessionId: string, turnId: string, gate: Gate): Promise<{ turn: TurnContext; workspace: WorkspaceContext; session: SessionContext }> {
    const view = await this.turn(caller, sessionId, turnId);
    const state = gate.closed && view.state === 'open' ? 'closing' : String(view.state);
    if (state !== 'open') throw new BerthError('invalid_state', `The turn is ${state}: it admits no new call.`, { turnId, reason: state });
    const turn = view.context;
    const session = await this.deps.session(caller, sessionId);
    const workspace = await this.boundWorkspace(caller, session, sessionId);
    const ownership = await this.deps.actors.get<OwnershipContext>('ownership', turn.ownership);
    if (ownership?.context.holder?.turnId !== turnId) {
      throw new BerthError('invalid_state', 'The turn does not hold its storage any more (an admin cleared it).', { turnId, reason: 'not_holder' });
    }
    return { turn, workspace, session };
  }

  /** The session's workspace, still the binding it recorded: same workspace, same generation, not deleted. */
  private async boundWorkspace(caller: Caller, session: SessionContext, sessionId: string): Promise<WorkspaceContext> {
    if (!session.workspaceId) throw new BerthError('invalid_request', 'The session has no workspace.', { sessionId, reason: 'no_workspace' });
    const workspace = await this.deps.workspaces.context(caller, session.workspaceId).catch((e) => {
      // The workspace went (deleted) after the session was bound to it: the binding no longer matches.
      if (isBerthError(e, 'not_found')) throw new BerthError('workspace_unavailable', 'The session\'s workspace is gone.', { sessionId, reason: 'deleted' });
      throw e;
    });
    if (workspace.generation !== session.workspaceGeneration) {
      throw new BerthError('workspace_unavailable', 'The workspace was rebound since the session was bound to it.', {
        sessionId,
        reason: 'generation_mismatch',
        bound: session.workspaceGeneration,
        current: workspace.generation,
      });
    }
    return workspace;
  }

  /** The session directory: an existing directory under the root, reached without a link (else workspace_unavailable). */
  private async sessionDirectory(workspace: WorkspaceContext, cwd: string): Promise<void> {
    const placed = await this.deps.directories.place(workspace);
    try {
      await new TurnFiles(placed).directory(cwd);
    } catch (e) {
      if (!isBerthError(e)) throw e;
      const reason = e.detail.reason === 'symlink' ? 'session_directory_link' : 'session_directory_missing';
      throw new BerthError('workspace_unavailable', 'The session\'s directory is missing or reached through a link.', { workspaceId: workspace.id, reason, cwd });
    }
  }

  private async acquire(key: string, claim: { holder: string; sessionId: string; workspaceId: string; scope: string }, deadline: number): Promise<void> {
    let waiting = false;
    try {
      for (let pollMs = BUSY_POLL_FIRST_MS; ; pollMs = Math.min(pollMs * 2, BUSY_POLL_LAST_MS)) {
        const current = (await this.deps.actors.get<OwnershipContext>('ownership', key))?.context.holder;
        if (current?.turnId === claim.holder) return; // held by this turn already: idempotent, nothing written
        try {
          await this.deps.actors.send('ownership', key, { type: 'ownership.acquired', ...claim, at: this.deps.now() });
          return;
        } catch (e) {
          const left = deadline - Date.now();
          if (!isBerthError(e, 'workspace_busy') || left <= 0) throw e;
          if (!waiting) {
            // A scope's waits are bounded: each holds a request open and looks again now and then.
            const waiters = this.waitersOf.get(claim.scope) ?? 0;
            if (waiters >= WAITERS_PER_SCOPE) throw new BerthError('workspace_busy', e.message, { ...e.detail, waiters: 'at_limit' });
            this.waitersOf.set(claim.scope, waiters + 1);
            waiting = true;
          }
          await this.freed(key, Math.min(left, pollMs));
        }
      }
    } finally {
      if (waiting) {
        const left = (this.waitersOf.get(claim.scope) ?? 1) - 1;
        if (left > 0) this.waitersOf.set(claim.scope, left);
        else this.waitersOf.delete(claim.scope);
      }
    }
  }

  /** Gives the storage back if this turn holds it (a stale release, or one cleared meanwhile, changes nothing). */
  private async giveBack(key: string, turnId: string): Promise<void> {
    try {
      await this.deps.actors.send('ownership', key, { type: 'ownership.released', holder: turnId, at: this.deps.now() });
    } catch (e) {
      // Not this turn's any more (free, another's) or retired with its workspace: nothing of this turn to give back.
      if (!isBerthError(e, 'invalid_state') && !isBerthError(e, 'workspace_unavailable')) throw e;
    }
    this.wake(key);
  }

  /** The turn released (straight from open when nothing had to be waited for). */
  private async finish(turnId: string, cleared: boolean): Promise<TurnView> {
    const sent = await this.deps.actors.send<TurnContext>('turn', turnId, { type: 'turn.released', ...(cleared ? { cleared: true } : {}), at: this.deps.now() });
    this.gates.delete(turnId);
    return viewOf(sent);
  }

  /** Records each settled, unrecorded shell execution's changes (after-manifest against its before-manifest). */
  private recordShellChanges(turn: TurnContext): Promise<void> {
    if (!turn.executions.some((x) => !x.recorded)) return Promise.resolve();
    const previous = this.recording.get(turn.id) ?? Promise.resolve();
    const next = previous.then(async () => {
      const fresh = (await this.deps.actors.get<TurnContext>('turn', turn.id))?.context ?? turn;
      const pending = fresh.executions.filter((x) => !x.recorded);
      if (pending.length === 0) return;
      const workspace = (await this.deps.actors.get<WorkspaceContext>('workspace', fresh.workspaceId))?.context;
      if (!workspace) return;
      const after = await this.deps.directories.place(workspace).then((p) => manifestOf(p.root)).catch(() => undefined);
      for (const x of pending) {
        // Admitted, then refused before it was accepted (a quota, a bad input): it changed nothing, and what the
        // turn's tools changed since is theirs, already recorded.
        const accepted = await this.deps.execution({ scope: fresh.scope, role: 'member' }, x.executionId, 0);
        if (!accepted) {
          await this.deps.actors.send('turn', fresh.id, { type: 'turn.execution_recorded', executionId: x.executionId, at: this.deps.now() }).catch(ignoreRefusal);
          continue;
        }
        const before = await this.manifest(x.manifest);
        const changes: FileChange[] = before && after ? diffManifests(before, after) : [];
        // A command in a view its allocation keeps: its checkpoint carried the changes (and moved the head) already.
        const saved = (await this.deps.actors.get<ExecutionContext>('execution', x.executionId))?.context.checkpoint;
        await this.deps.actors.send('workspace', fresh.workspaceId, {
          type: 'workspace.files_changed',
          turnId: fresh.id,
          tool: 'shell',
          executionId: x.executionId,
          ...(saved?.outcome === 'published' && saved.checkpointId ? { checkpointId: saved.checkpointId } : {}),
          changes: changes.slice(0, MAX_CHANGES_PER_EVENT),
          // Without both manifests (the root went, a manifest aged out) what changed is not known: said, not guessed.
          ...(changes.length > MAX_CHANGES_PER_EVENT || !before || !after || before.truncated || after.truncated ? { truncated: true } : {}),
          at: this.deps.now(),
        }).catch(ignoreRefusal);
        await this.deps.actors.send('turn', fresh.id, { type: 'turn.execution_recorded', executionId: x.executionId, at: this.deps.now() }).catch(ignoreRefusal);
      }
    });
    const settled = next.catch(() => undefined);
    this.recording.set(turn.id, settled);
    void settled.finally(() => {
      if (this.recording.get(turn.id) === settled) this.recording.delete(turn.id);
    });
    return next;
  }

  private async manifest(ref: string | null): Promise<Manifest | undefined> {
    if (!ref) return undefined;
    const [digest, size] = ref.split('/');
    try {
      return JSON.parse((await this.deps.artifacts.readRange({ digest: digest!, size: Number(size) }, 0, Number(size))).toString('utf8')) as Manifest;
    } catch {
      return undefined;
    }
  }

  private gateOf(turnId: string): Gate {
    let gate = this.gates.get(turnId);
    if (!gate) this.gates.set(turnId, (gate = new Gate()));
    return gate;
  }

  private freed(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiting.get(key);
      if (!set) this.waiting.set(key, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        set!.delete(done);
        if (set!.size === 0 && this.waiting.get(key) === set) this.waiting.delete(key);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  private wake(key: string): void {
    for (const done of [...(this.waiting.get(key) ?? [])]) done();
  }
}

export type FileTool = 'read' | 'write' | 'edit' | 'list' | 'stat' | 'mkdir' | 'remove' | 'stage' | 'restore' | 'checkpoint';

/** What a tool call answers, and the changes it made (recorded in the workspace history). */
export interface ToolResult<T> {
  value: T;
  changes: FileChange[];
  /** Settles when the call is over, if that is after it answers (a read streaming its file): the turn counts it until then. */
  settled?: Promise<unknown>;
  /** restore: the checkpoint whose tree the changes came from. */
  checkpointId?: string;
}

/** The session's cwd joined with an execution's (both relative to the root), or invalid_request for a bad spelling. */
function joinCwd(sessionCwd: string, cwd: string | undefined): string {
  const joined = [sessionCwd, cwd ?? ''].filter((s) => s !== '').join('/');
  const split = splitRelativePath(joined);
  if ('problem' in split) throw new BerthError('invalid_request', 'A workspace cwd is a relative path inside the workspace.', { cwd, reason: split.problem });
  return split.segments.join('/');
}

const viewOf = (view: Pick<ActorView<TurnContext>, 'state' | 'context'>): TurnView => {
  const c = view.context;
  return {
    id: c.id,
    object: 'turn',
    sessionId: c.sessionId,
    workspaceId: c.workspaceId,
    state: view.state as TurnView['state'],
    executions: c.executions.map((x) => ({ executionId: x.executionId, recorded: x.recorded })),
    cleared: c.cleared,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  };
};

/** A bookkeeping event the actor refuses (a session deleted meanwhile, a record already made) changes nothing. */
const ignoreRefusal = (e: unknown): void => {
  if (!isBerthError(e)) throw e;
};

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
