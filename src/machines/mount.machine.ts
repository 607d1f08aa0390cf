/**
 * The mount actor (stream `mount-<workspaceId>`, issue 14, DESIGN §10): one writable view of a workspace, kept on
 * the allocation it was made on (its target) at a mount generation of its own.
 *
 * unbound → preparing(target, generation) → active → saving(attempt) → detaching → detached → preparing …
 *
 * Rules encoded here:
 * - a view stays on its recorded target; another target means a new preparation at the next generation, allowed only
 *   once the old view is detached or its allocation is confirmed gone (`unavailable` after `mount.lost`);
 * - every checkpoint attempt is recorded (`checkpoint_started`) before it captures, with the binding generation,
 *   target, mount generation and head revision it builds on; its outcome (published, stale, failed) is recorded once,
 *   and a recovered runtime resumes the attempts still capturing under their original identities;
 * - executions pin the view from before their dispatch until they are saved: a pinned view is not detached;
 * - a detachment (explicit, or the allocation's release) closes admission, publishes a final checkpoint (a stale
 *   one is followed by a recapture of the current view, a failed one is retried by recovery and maintenance, one past
 *   the capture limits is given up, recorded), then gives the allocation's use back; a lost allocation leaves the view unavailable, never refilled from an older tree.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { AttemptReason, MountEvent, MountTarget, ViewBase } from '../../schemas/events/mount.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface Attempt {
  reason: AttemptReason;
  executionId?: string;
  bindingGeneration: number;
  mountGeneration: number;
  baseRevision: number;
  status: 'capturing' | 'published' | 'stale' | 'failed';
  checkpointId?: string;
  revision?: number;
  at: number;
}

export interface MountContext {
  workspaceId: string;
  scope: string;
  target: MountTarget | null;
  mountGeneration: number;
  /** What the view holds, in step with the workspace at `base.revision`. */
  base: ViewBase | null;
  /** The allocation whose use a re-preparation gives back (the lost one it leaves). */
  previousAllocationId: string | null;
  pins: string[];
  attempts: Record<string, Attempt>;
  detachReason: 'explicit' | 'release' | null;
  problem: { code: string; message: string } | null;
  updatedAt: number;
}

/** Finished attempts kept for answering a retried request (the stream keeps all of them). */
const FINISHED_ATTEMPTS_KEPT = 32;

/** `mount.materialize`: take the allocation's use (giving back `previousAllocationId`'s), fill the view with `base`. */
export interface MaterializeParams {
  workspaceId: string;
  target: MountTarget;
  mountGeneration: number;
  base: ViewBase;
  previousAllocationId: string | null;
}

/** `mount.capture`: run the attempts still capturing (one after a start, every open one after a recovery). */
export interface CaptureParams {
  workspaceId: string;
  attemptIds: string[];
}

/** `mount.begin_save`: record the final attempt of a detachment against the head as it is now. */
export interface BeginSaveParams {
  workspaceId: string;
}

/** `mount.unuse`: give the allocation's use back, then `mount.detached`. */
export interface UnuseParams {
  workspaceId: string;
  allocationId: string;
}

const capturing = (context: MountContext): string[] =>
  Object.entries(context.attempts)
    .filter(([, a]) => a.status === 'capturing')
    .map(([id]) => id);

const materialize = {
  type: 'mount.materialize',
  params: ({ context }: { context: MountContext }): MaterializeParams => ({
    workspaceId: context.workspaceId,
    target: context.target!,
    mountGeneration: context.mountGeneration,
    base: context.base!,
    previousAllocationId: context.previousAllocationId,
  }),
} as const;
const captureStarted = {
  type: 'mount.capture',
  params: ({ context, event }: { context: MountContext; event: MountEvent }): CaptureParams => ({
    workspaceId: context.workspaceId,
    attemptIds: event.type === 'mount.checkpoint_started' ? [event.attemptId] : [],
  }),
} as const;
const captureOpen = {
  type: 'mount.capture',
  params: ({ context }: { context: MountContext }): CaptureParams => ({ workspaceId: context.workspaceId, attemptIds: capturing(context) }),
} as const;
const beginSave = { type: 'mount.begin_save', params: ({ context }: { context: MountContext }): BeginSaveParams => ({ workspaceId: context.workspaceId }) } as const;
const unuse = {
  type: 'mount.unuse',
  params: ({ context }: { context: MountContext }): UnuseParams => ({ workspaceId: context.workspaceId, allocationId: context.target!.allocationId }),
} as const;

const finishAttempt = (context: MountContext, id: string, patch: Partial<Attempt>): Record<string, Attempt> => {
  const attempts = { ...context.attempts, [id]: { ...context.attempts[id]!, ...patch } };
  const finished = Object.keys(attempts).filter((k) => attempts[k]!.status !== 'capturing');
  for (const old of finished.slice(0, Math.max(0, finished.length - FINISHED_ATTEMPTS_KEPT))) delete attempts[old];
  return attempts;
};

const mountSetup = setup({
  types: { context: {} as MountContext, events: {} as MountEvent, input: {} as { id: string } },
  actions: {
    'mount.materialize': effect<MaterializeParams>(),
    'mount.capture': effect<CaptureParams>(),
    'mount.begin_save': effect<BeginSaveParams>(),
    'mount.unuse': effect<UnuseParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    prepare: assign(({ context, event }) => {
      if (event.type !== 'mount.prepare_requested') return {};
      const leaving = context.target && context.target.allocationId !== event.target.allocationId ? context.target.allocationId : null;
      return {
        scope: event.scope,
        target: event.target,
        mountGeneration: event.mountGeneration,
        base: event.base,
        previousAllocationId: leaving,
        pins: [],
        detachReason: null,
        problem: null,
      };
    }),
    settlePrepare: assign({ previousAllocationId: null }),
    refresh: assign(({ event }) => (event.type === 'mount.refreshed' ? { base: event.base } : {})),
    pin: assign(({ context, event }) =>
      event.type === 'mount.pinned' && !context.pins.includes(event.executionId) ? { pins: [...context.pins, event.executionId] } : {},
    ),
    unpin: assign(({ context, event }) => (event.type === 'mount.unpinned' ? { pins: context.pins.filter((p) => p !== event.executionId) } : {})),
    startAttempt: assign(({ context, event }) => {
      if (event.type !== 'mount.checkpoint_started') return {};
      const { attemptId, reason, executionId, bindingGeneration, mountGeneration, baseRevision, at } = event;
      const attempt: Attempt = { reason, bindingGeneration, mountGeneration, baseRevision, status: 'capturing', at, ...(executionId ? { executionId } : {}) };
      return { attempts: { ...context.attempts, [attemptId]: attempt } };
    }),
    publish: assign(({ context, event }) =>
      event.type === 'mount.checkpoint_published'
        ? { attempts: finishAttempt(context, event.attemptId, { status: 'published', checkpointId: event.checkpointId, revision: event.revision }), base: event.view }
        : {},
    ),
    stale: assign(({ context, event }) => (event.type === 'mount.checkpoint_stale' ? { attempts: finishAttempt(context, event.attemptId, { status: 'stale' }) } : {})),
    fail: assign(({ context, event }) => (event.type === 'mount.checkpoint_failed' ? { attempts: finishAttempt(context, event.attemptId, { status: 'failed' }) } : {})),
    requestDetach: assign(({ event }) => (event.type === 'mount.detach_requested' ? { detachReason: event.reason } : {})),
    /** A view whose allocation is gone captures nothing more: its open attempts end failed. */
    loseView: assign(({ context, event }) => {
      if (event.type !== 'mount.lost') return {};
      let attempts = context.attempts;
      for (const id of capturing(context)) attempts = finishAttempt({ ...context, attempts }, id, { status: 'failed' });
      return { attempts, pins: [], problem: { code: 'allocation_lost', message: event.reason } };
    }),
    failPrepare: assign(({ event }) => (event.type === 'mount.prepare_failed' ? { problem: { code: event.code, message: event.message } } : {})),
  },
  guards: {
    attemptOpen: ({ context, event }) =>
      (event.type === 'mount.checkpoint_published' || event.type === 'mount.checkpoint_stale' || event.type === 'mount.checkpoint_failed') &&
      context.attempts[event.attemptId]?.status === 'capturing',
    newAttempt: ({ context, event }) => event.type === 'mount.checkpoint_started' && !(event.attemptId in context.attempts),
    ownTarget: ({ context, event }) => event.type === 'mount.lost' && context.target?.allocationId === event.allocationId,
    pinned: ({ context, event }) => event.type === 'mount.unpinned' && context.pins.includes(event.executionId),
    unpinnedNow: ({ context }) => context.pins.length === 0,
    /** The final attempt published and none other is open: the view may be let go. */
    savedLast: ({ context, event }) =>
      event.type === 'mount.checkpoint_published' &&
      context.attempts[event.attemptId]?.status === 'capturing' &&
      capturing(context).length === 1,
    overLimits: ({ context, event }) =>
      event.type === 'mount.checkpoint_failed' && event.code === 'quota_exceeded' && context.attempts[event.attemptId]?.status === 'capturing',
    refreshable: ({ context, event }) => event.type === 'mount.refreshed' && event.base.revision >= (context.base?.revision ?? 0),
  },
});

/** What an open attempt's outcome does while the view is in use (active): recorded, nothing else moves. */
const outcomes = {
  'mount.checkpoint_published': { guard: 'attemptOpen', actions: ['publish', 'stamp'] },
  'mount.checkpoint_stale': { guard: 'attemptOpen', actions: ['stale', 'stamp'] },
  'mount.checkpoint_failed': { guard: 'attemptOpen', actions: ['fail', 'stamp'] },
} as const;

const lost = { 'mount.lost': { guard: 'ownTarget', target: 'unavailable', actions: ['loseView', 'stamp'] } } as const;

export const mountMachine = mountSetup.createMachine({
  id: 'mount',
  context: ({ input }) => ({
    workspaceId: input.id,
    scope: '',
    target: null,
    mountGeneration: 0,
    base: null,
    previousAllocationId: null,
    pins: [],
    attempts: {},
    detachReason: null,
    problem: null,
    updatedAt: 0,
  }),
  initial: 'unbound',
  states: {
    unbound: { on: { 'mount.prepare_requested': { target: 'preparing', actions: ['prepare', 'stamp', materialize] } } },
    /** The view is being made and filled; recovery finishes the same materialization (it is idempotent). */
    preparing: {
      on: {
        'mount.prepared': { target: 'active', actions: ['settlePrepare', 'stamp'] },
        'mount.prepare_failed': { target: 'unavailable', actions: ['failPrepare', 'settlePrepare', 'stamp'] },
        'runtime.recovered': { actions: ['stamp', materialize] },
        ...lost,
      },
    },
    active: {
      on: {
        'mount.refreshed': { guard: 'refreshable', actions: ['refresh', 'stamp'] },
        'mount.pinned': { actions: ['pin', 'stamp'] },
        'mount.unpinned': { guard: 'pinned', actions: ['unpin', 'stamp'] },
        'mount.checkpoint_started': { guard: 'newAttempt', actions: ['startAttempt', 'stamp', captureStarted] },
        ...outcomes,
        'mount.detach_requested': { guard: 'unpinnedNow', target: 'saving', actions: ['requestDetach', 'stamp', beginSave] },
        'runtime.recovered': { actions: ['stamp', captureOpen] },
        ...lost,
      },
    },
    /** Admission is closed; the final checkpoint is being published (a stale one is followed by a recapture). */
    saving: {
      on: {
        'mount.checkpoint_started': { guard: 'newAttempt', actions: ['startAttempt', 'stamp', captureStarted] },
        'mount.checkpoint_published': [
          { guard: 'savedLast', target: 'detaching', actions: ['publish', 'stamp', unuse] },
          { guard: 'attemptOpen', actions: ['publish', 'stamp'] },
        ],
        'mount.checkpoint_stale': { guard: 'attemptOpen', actions: ['stale', 'stamp', beginSave] },
        'mount.checkpoint_failed': [
          // A view past the capture limits can never be saved: it is let go unsaved (the failure is recorded), so a
          // tenant cannot keep its allocation from being released by filling it.
          { guard: 'overLimits', target: 'detaching', actions: ['fail', 'stamp', unuse] },
          // Otherwise kept saving: the next release request or maintenance tries the detachment's save again.
          { guard: 'attemptOpen', actions: ['fail', 'stamp'] },
        ],
        'mount.unpinned': { guard: 'pinned', actions: ['unpin', 'stamp'] },
        'runtime.recovered': [
          { guard: ({ context }) => capturing(context).length > 0, actions: ['stamp', captureOpen] },
          { actions: ['stamp', beginSave] },
        ],
        ...lost,
      },
    },
    /** Saved: the allocation's use is being given back. */
    detaching: {
      on: {
        'mount.detached': { target: 'detached', actions: 'stamp' },
        'runtime.recovered': { actions: ['stamp', unuse] },
      },
    },
    detached: { on: { 'mount.prepare_requested': { target: 'preparing', actions: ['prepare', 'stamp', materialize] } } },
    /**
     * Its allocation is confirmed gone, or the view could not be made: the use stays until a new view is prepared
     * elsewhere (which gives it back), and nothing older than the head is ever put in its place.
     */
    unavailable: {
      on: {
        'mount.prepare_requested': { target: 'preparing', actions: ['prepare', 'stamp', materialize] },
        // Nothing is left to save (the loss is recorded): a release or an explicit detachment gives the use back.
        'mount.detach_requested': { target: 'detaching', actions: ['requestDetach', 'stamp', unuse] },
      },
    },
  },
});

export type MountSnapshot = SnapshotFrom<typeof mountMachine>;

export const reject = (snapshot: MountSnapshot, event: IncomingEvent): Rejection => {
  const state = String(snapshot.value);
  const { context } = snapshot;
  const detail = { state, workspaceId: context.workspaceId, type: event.type, target: context.target, mountGeneration: context.mountGeneration };
  switch (event.type) {
    case 'mount.prepare_requested':
      return { code: 'invalid_state', message: `The workspace already has a view (${state}).`, detail: { ...detail, reason: 'attached' } };
    case 'mount.checkpoint_started':
      if (String(event.attemptId) in context.attempts) return { code: 'invalid_state', message: 'That attempt is recorded already.', detail: { ...detail, reason: 'attempt_exists' } };
    // falls through: a new attempt is refused as a pin is
    case 'mount.pinned':
    case 'mount.refreshed':
      if (state === 'active') return { code: 'invalid_state', message: 'The view is at a newer revision already.', detail: { ...detail, reason: 'older_base' } };
      if (state === 'saving' || state === 'detaching') return { code: 'workspace_busy', message: 'The workspace\'s view is being saved and detached.', detail: { ...detail, reason: 'detaching' } };
      return { code: 'workspace_unavailable', message: `The workspace's view is ${state}.`, detail: { ...detail, reason: state, problem: context.problem } };
    case 'mount.detach_requested':
      if (state === 'active') return { code: 'workspace_busy', message: 'Executions still write the view.', detail: { ...detail, reason: 'pinned', pins: context.pins } };
      return { code: 'invalid_state', message: `The view is ${state}: nothing to detach.`, detail: { ...detail, reason: state } };
    default:
      return { code: 'invalid_state', message: `The mount does not accept ${event.type} while ${state}.`, detail: { ...detail, reason: 'unexpected' } };
  }
};
