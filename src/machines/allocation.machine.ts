/**
 * The allocation actor (stream `allocation-<id>`): one physical incarnation of an Environment (seed 000, DESIGN §5).
 * Its intent is persisted before the provider is called; the provider's reports move it between requested, pending,
 * unknown and ready; durable uses pin it; release closes admission and needs confirmed termination.
 *
 * Rules encoded here:
 * - one provider call at a time (`context.call`): an overlapping explicit operation (release, resume, maintenance
 *   reconciliation) is rejected with `environment_busy`;
 * - unknown is inspected by the original request id, never re-allocated; only confirmed absence (`absent`) ends the
 *   attempt (`failed`), after which the environment may acquire a new allocation with the next generation;
 * - a verified partial allocation (`pending`, never admitted, so without uses) may be resumed under its original
 *   intent with the same request id; a ready allocation found absent becomes `lost` (uses kept, never recreated);
 * - recovery (`runtime.recovered`) yields inspection only: `provider.inspect`, or, while releasing,
 *   `provider.deallocate` again, which is idempotent and is itself the check that confirms absence;
 * - admission uses of an older epoch of the recovering runtime are dropped; execution, mount and physical uses
 *   survive a restart (a restart is no proof that remote work stopped);
 * - a warm pool's allocation (its `environmentId` a pool id) tells no environment anything and is never reclaimed
 *   for idleness (its pool retires it); `allocation.claimed` rebinds it, ready and unused, to an environment once,
 *   recording the content version it shows; the claiming environment's effect tells it, once the version is shown.
 */
import { and, assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type {
  AllocationEvent,
  AllocationReportData,
  ContentMountData,
  PhysicalIdentityData,
  UseKind,
} from '../../schemas/events/allocation.ts';
import type { EnvironmentEvent } from '../../schemas/events/environment.ts';
import { isPoolId } from '../../schemas/ids.ts';
import { defaultsBeforeRecorded, emptyProfile, type Ownership, type Profile } from '../../schemas/profile.ts';
import { effect } from './effect.ts';
import { viewOf, type MachineView } from './machine-view.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

/** Idle interval for managed allocations whose profile names none. */
export const DEFAULT_IDLE_SECONDS = 300;

export interface Use {
  kind: UseKind;
  runtimeId?: string;
  epoch?: number;
  at: number;
}

export interface AllocationContext {
  id: string;
  environmentId: string;
  requestId: string;
  generation: number;
  profile: Profile;
  /** The content version bound at allocation (a container cannot gain mounts later); absent when none is. */
  contentVersion?: number;
  /** Read-only binds the provider makes with the allocation (the version at /env/<slug>). */
  mounts?: ContentMountData[];
  /** borrowed (never destroyed, never idle-reclaimed: the host) or managed (made and reclaimed by Berth: containers). */
  ownership: Ownership;
  identity: PhysicalIdentityData | null;
  uses: Record<string, Use>;
  /** The provider call in flight, if any. After a crash it names a call that died with its runtime. */
  call: 'allocate' | 'inspect' | 'deallocate' | null;
  lastReport: AllocationReportData | null;
  lastActivityAt: number;
  releaseReason: 'explicit' | 'idle' | null;
  updatedAt: number;
}

/**
 * Params of `provider.allocate`, `provider.inspect` and `provider.deallocate`: structurally both the provider's
 * AllocationIntent and its AllocationRef; `profile.provider` names the provider.
 * - `provider.allocate`: `provider.allocate(intent)` (creates, or adopts/resumes what carries `requestId`); the
 *   handler returns `allocation.reported` {report, at}, with `unknown` if the call threw or timed out.
 * - `provider.inspect`: `provider.inspect(ref)` by the original `requestId`; returns `allocation.reported`.
 * - `provider.deallocate`: `provider.deallocate(ref)`; returns `allocation.deallocated` {result, at}. Borrowed
 *   allocations are only released by their provider, never destroyed.
 */
export interface ProviderCallParams {
  allocationId: string;
  requestId: string;
  environmentId: string;
  generation: number;
  profile: Profile;
  contentVersion?: number;
  mounts?: ContentMountData[];
  identity?: PhysicalIdentityData;
}

/**
 * `environment.notify`: send `event` to the environment actor `environmentId`. A rejection with `invalid_state` or
 * `stale_target` means the environment already knows or moved on; the handler ignores those two.
 */
export interface EnvironmentNotifyParams {
  environmentId: string;
  /** Null for a pool's allocation: it has no environment to tell. */
  event: EnvironmentEvent | null;
}

type ReportStatus = AllocationReportData['status'];

/** The ownership the intent records (its provider's); intents written before it was recorded had their kind's. */
const ownershipOf = (recorded: Ownership | undefined, profile: Profile): Ownership =>
  recorded ?? defaultsBeforeRecorded[profile.provider].ownership;

const reportReason = (report: AllocationReportData | null): string =>
  report && 'reason' in report && report.reason ? report.reason : (report?.status ?? 'unknown');

const callParams = ({ context }: { context: AllocationContext }): ProviderCallParams => ({
  allocationId: context.id,
  requestId: context.requestId,
  environmentId: context.environmentId,
  generation: context.generation,
  profile: context.profile,
  ...(context.contentVersion !== undefined ? { contentVersion: context.contentVersion } : {}),
  ...(context.mounts?.length ? { mounts: context.mounts } : {}),
  ...(context.identity ? { identity: context.identity } : {}),
});

/** The environment event that reflects this allocation's state, if it is one the environment must learn. */
const environmentEventFor = (context: AllocationContext, state: string, at: number): EnvironmentEvent | null => {
  if (isPoolId(context.environmentId)) return null;
  const allocationId = context.id;
  switch (state) {
    case 'ready':
      return { type: 'environment.allocated', allocationId, generation: context.generation, at };
    case 'failed':
      return { type: 'environment.allocation_failed', allocationId, reason: reportReason(context.lastReport), at };
    case 'lost':
    case 'fenced':
      return { type: 'environment.allocation_lost', allocationId, reason: reportReason(context.lastReport), at };
    case 'releasing':
      return { type: 'environment.allocation_releasing', allocationId, at };
    case 'released':
      return { type: 'environment.allocation_released', allocationId, at };
    default:
      return null;
  }
};

/** `environment.notify` telling the environment the state this transition enters. */
const notify = (state: string) =>
  ({
    type: 'environment.notify',
    params: ({ context, event }: { context: AllocationContext; event: AllocationEvent }): EnvironmentNotifyParams => ({
      environmentId: context.environmentId,
      event: environmentEventFor(context, state, event.at),
    }),
  }) as const;

/** Uses that keep an allocation from being released: every one but a workspace view's (a release saves and detaches it first). */
const blockingUses = (context: AllocationContext): string[] => Object.keys(context.uses).filter((id) => context.uses[id]!.kind !== 'mount');
const mountUses = (context: AllocationContext): string[] => Object.keys(context.uses).filter((id) => context.uses[id]!.kind === 'mount');

/**
 * `mounts.detach`: ask each workspace view on the allocation (its mount uses: the use id is the workspace id) to
 * save and detach, as the allocation's release needs (each gives its use back once detached).
 * `mounts.lost`: tell each view its allocation is confirmed gone (or not the incarnation recorded).
 */
export interface MountsParams {
  allocationId: string;
  workspaceIds: string[];
}
const mountsParams = ({ context }: { context: AllocationContext }): MountsParams => ({ allocationId: context.id, workspaceIds: mountUses(context) });
const detachMounts = { type: 'mounts.detach', params: mountsParams } as const;
const loseMounts = { type: 'mounts.lost', params: mountsParams } as const;

/** When a managed allocation becomes reclaimable for idleness (borrowed ones never are). */
const reclaimableSince = (context: AllocationContext): number | null =>
  context.ownership === 'managed' && !isPoolId(context.environmentId)
    ? context.lastActivityAt + (context.profile.idleSeconds ?? DEFAULT_IDLE_SECONDS) * 1000
    : null;

const idleElapsed = (context: AllocationContext, at: number): boolean => {
  const since = reclaimableSince(context);
  return since !== null && at >= since;
};

const allocate = { type: 'provider.allocate', params: callParams } as const;
const inspect = { type: 'provider.inspect', params: callParams } as const;
const deallocate = { type: 'provider.deallocate', params: callParams } as const;

const reportIs = (status: ReportStatus) => ({ type: 'reportIs', params: { status } }) as const;
const deallocatedAs = (result: 'terminated' | 'unknown') => ({ type: 'deallocatedAs', params: { result } }) as const;

const allocationSetup = setup({
  types: {
    context: {} as AllocationContext,
    events: {} as AllocationEvent,
    input: {} as { id: string },
  },
  guards: {
    /** A report answers the call in flight; one arriving with no call in flight is refused. */
    reportIs: ({ context, event }, params: { status: ReportStatus }) =>
      context.call !== null && event.type === 'allocation.reported' && event.report.status === params.status,
    noCall: ({ context }) => context.call === null,
    canResume: ({ context }) => context.call === null && Object.keys(context.uses).length === 0,
    deallocatedAs: ({ context, event }, params: { result: 'terminated' | 'unknown' }) =>
      context.call === 'deallocate' && event.type === 'allocation.deallocated' && event.result === params.result,
    useHeld: ({ context, event }) =>
      (event.type === 'allocation.use_acquired' || event.type === 'allocation.use_released') && event.useId in context.uses,
    /** `idle` is offered only where an allocation once existed (ready, lost, fenced); before that only `explicit`. */
    canRelease: ({ context, event }, params: { idle: boolean }) => {
      if (event.type !== 'allocation.release_requested') return false;
      if (context.call !== null || blockingUses(context).length > 0) return false;
      return event.reason === 'explicit' || (params.idle && idleElapsed(context, event.at));
    },
    hasMounts: ({ context }) => mountUses(context).length > 0,
    /**
     * A pool's allocation nobody uses can change hands. An inspection in flight (recovery's) does not stop it: its
     * report comes back to the allocation, whoever owns it by then (and a loss is told to that environment).
     */
    claimable: ({ context }) => isPoolId(context.environmentId) && Object.keys(context.uses).length === 0,
    /** The last use (a detached view's) goes: nothing is left to save, compute may go. */
    lastUse: ({ context, event }) => event.type === 'allocation.use_released' && event.useId in context.uses && Object.keys(context.uses).length === 1,
  },
  actions: {
    'provider.allocate': effect<ProviderCallParams>(),
    'provider.inspect': effect<ProviderCallParams>(),
    'provider.deallocate': effect<ProviderCallParams>(),
    'environment.notify': effect<EnvironmentNotifyParams>(),
    'mounts.detach': effect<MountsParams>(),
    'mounts.lost': effect<MountsParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    touch: assign({ lastActivityAt: ({ event }) => event.at }),
    recordIntent: assign(({ event }) => {
      if (event.type !== 'allocation.intended') return {};
      const { environmentId, requestId, generation, profile, contentVersion, mounts, ownership } = event;
      return {
        environmentId,
        requestId,
        generation,
        profile,
        ownership: ownershipOf(ownership, profile),
        ...(contentVersion !== undefined ? { contentVersion } : {}),
        ...(mounts?.length ? { mounts } : {}),
      };
    }),
    claim: assign(({ event }) => {
      if (event.type !== 'allocation.claimed') return {};
      const { environmentId, generation, profile, contentVersion } = event;
      return { environmentId, generation, profile, ...(contentVersion !== undefined ? { contentVersion } : {}) };
    }),
    callAllocate: assign({ call: 'allocate' }),
    callInspect: assign({ call: 'inspect' }),
    callDeallocate: assign({ call: 'deallocate' }),
    endCall: assign({ call: null }),
    recordReport: assign(({ context, event }) => {
      if (event.type !== 'allocation.reported') return {};
      const { report } = event;
      const identity = report.status === 'ready' || report.status === 'fenced' ? report.identity : context.identity;
      return { call: null, lastReport: report, identity };
    }),
    acquireUse: assign({
      uses: ({ context, event }) => {
        if (event.type !== 'allocation.use_acquired' || event.useId in context.uses) return context.uses;
        const { useId, kind, runtimeId, epoch, at } = event;
        return { ...context.uses, [useId]: { kind, at, ...(kind === 'admission' ? { runtimeId, epoch } : {}) } };
      },
    }),
    releaseUse: assign({
      uses: ({ context, event }) => {
        if (event.type !== 'allocation.use_released') return context.uses;
        const { [event.useId]: _released, ...rest } = context.uses;
        return rest;
      },
    }),
    /** Admission uses written by an older epoch of the recovering runtime: that owner is gone. */
    dropStaleAdmissions: assign({
      uses: ({ context, event }) => {
        if (event.type !== 'runtime.recovered') return context.uses;
        const kept = Object.entries(context.uses).filter(
          ([, u]) => !(u.kind === 'admission' && u.runtimeId === event.runtimeId && (u.epoch ?? 0) < event.epoch),
        );
        return Object.fromEntries(kept);
      },
    }),
    startRelease: assign(({ event }) =>
      event.type === 'allocation.release_requested' ? { releaseReason: event.reason, call: 'deallocate' as const } : {},
    ),
    /** Admission closes first; compute is destroyed only once every view is saved and detached. */
    startSavingRelease: assign(({ event }) => (event.type === 'allocation.release_requested' ? { releaseReason: event.reason } : {})),
  },
});

/** How a report answers a call made before the allocation was ever ready. */
const reportRoutes = [
  { guard: reportIs('ready'), target: 'ready', actions: ['recordReport', 'touch', 'stamp', notify('ready')] },
  { guard: reportIs('pending'), target: 'pending', actions: ['recordReport', 'stamp'] },
  { guard: reportIs('absent'), target: 'failed', actions: ['recordReport', 'stamp', notify('failed')] },
  { guard: reportIs('unknown'), target: 'unknown', actions: ['recordReport', 'stamp'] },
  { guard: reportIs('fenced'), target: 'fenced', actions: ['recordReport', 'stamp', notify('fenced')] },
] as const;

/**
 * Release closes admission and deallocates; the guard refuses it with uses (other than workspace views) or a
 * provider call in flight. With views, it first has them saved and detached (release saves first).
 */
const releaseRoute = (idle: boolean) =>
  [
    {
      guard: and([{ type: 'canRelease', params: { idle } }, 'hasMounts']),
      target: 'releasing',
      actions: ['startSavingRelease', 'stamp', detachMounts, notify('releasing')],
    },
    {
      guard: { type: 'canRelease', params: { idle } },
      target: 'releasing',
      actions: ['startRelease', 'stamp', deallocate, notify('releasing')],
    },
  ] as const;

/** lost and fenced: the uses stay until their owners release them; then the remains may be released. */
const heldAfterLoss = allocationSetup.createStateConfig({
  on: {
    'allocation.use_acquired': { guard: 'useHeld', actions: ['touch', 'stamp'] },
    'allocation.use_released': { guard: 'useHeld', actions: ['releaseUse', 'touch', 'stamp'] },
    'allocation.release_requested': releaseRoute(true),
    'runtime.recovered': { actions: ['dropStaleAdmissions', 'stamp'] },
  },
});

export const allocationMachine = allocationSetup.createMachine({
  id: 'allocation',
  context: ({ input }) => ({
    id: input.id,
    environmentId: '',
    requestId: '',
    generation: 0,
    profile: emptyProfile,
    ownership: 'borrowed',
    identity: null,
    uses: {},
    call: null,
    lastReport: null,
    lastActivityAt: 0,
    releaseReason: null,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: {
        'allocation.intended': {
          target: 'requested',
          actions: ['recordIntent', 'callAllocate', 'touch', 'stamp', allocate],
        },
      },
    },
    /** A provider call (allocate, or an inspection of the same request) is in flight. */
    requested: {
      on: {
        'allocation.reported': reportRoutes,
        'runtime.recovered': { actions: ['callInspect', 'stamp', inspect] },
      },
    },
    /** Partly created; never admitted. Resumable under the same intent, or released. */
    pending: {
      on: {
        'allocation.reported': reportRoutes,
        'allocation.resume_requested': {
          guard: 'canResume',
          target: 'requested',
          actions: ['callAllocate', 'stamp', allocate],
        },
        'allocation.reconcile_requested': { guard: 'noCall', actions: ['callInspect', 'stamp', inspect] },
        'runtime.recovered': { actions: ['callInspect', 'stamp', inspect] },
        'allocation.release_requested': releaseRoute(false),
      },
    },
    /** The provider could not tell: inspected by the original request id until it can, never re-allocated. */
    unknown: {
      on: {
        'allocation.reported': reportRoutes,
        'allocation.reconcile_requested': { guard: 'noCall', actions: ['callInspect', 'stamp', inspect] },
        'runtime.recovered': { actions: ['callInspect', 'stamp', inspect] },
        'allocation.release_requested': releaseRoute(false),
      },
    },
    ready: {
      on: {
        'allocation.reported': [
          // Views on it learn it is gone (they keep their use until a view is made elsewhere or released).
          { guard: and([reportIs('absent'), 'hasMounts']), target: 'lost', actions: ['recordReport', 'stamp', notify('lost'), loseMounts] },
          { guard: reportIs('absent'), target: 'lost', actions: ['recordReport', 'stamp', notify('lost')] },
          { guard: and([reportIs('fenced'), 'hasMounts']), target: 'fenced', actions: ['recordReport', 'stamp', notify('fenced'), loseMounts] },
          { guard: reportIs('fenced'), target: 'fenced', actions: ['recordReport', 'stamp', notify('fenced')] },
          // ready confirms; pending and unknown cannot prove a loss, so the allocation stays as it was.
          { guard: reportIs('ready'), actions: ['recordReport', 'stamp'] },
          { guard: reportIs('pending'), actions: ['recordReport', 'stamp'] },
          { guard: reportIs('unknown'), actions: ['recordReport', 'stamp'] },
        ],
        'allocation.use_acquired': { actions: ['acquireUse', 'touch', 'stamp'] },
        'allocation.use_released': { guard: 'useHeld', actions: ['releaseUse', 'touch', 'stamp'] },
        // The claiming environment's effect tells it `allocated` itself, once the claim's content version is shown.
        'allocation.claimed': { guard: 'claimable', actions: ['claim', 'touch', 'stamp'] },
        'allocation.reconcile_requested': { guard: 'noCall', actions: ['callInspect', 'stamp', inspect] },
        'runtime.recovered': { actions: ['dropStaleAdmissions', 'callInspect', 'stamp', inspect] },
        'allocation.release_requested': releaseRoute(true),
      },
    },
    /**
     * Admission is closed; views are saved and detached first (their uses go), then deallocation is retried
     * (idempotently) until the provider confirms termination.
     */
    releasing: {
      on: {
        'allocation.use_released': [
          { guard: 'lastUse', actions: ['releaseUse', 'callDeallocate', 'stamp', deallocate] },
          { guard: 'useHeld', actions: ['releaseUse', 'stamp'] },
        ],
        'allocation.deallocated': [
          { guard: deallocatedAs('terminated'), target: 'released', actions: ['endCall', 'stamp', notify('released')] },
          // `unknown` keeps the release intent: recovery and maintenance deallocate again.
          { guard: deallocatedAs('unknown'), actions: ['endCall', 'stamp'] },
        ],
        'allocation.reconcile_requested': [
          { guard: and(['noCall', 'hasMounts']), actions: ['stamp', detachMounts] },
          { guard: 'noCall', actions: ['callDeallocate', 'stamp', deallocate] },
        ],
        'runtime.recovered': [
          { guard: 'hasMounts', actions: ['stamp', detachMounts] },
          { actions: ['callDeallocate', 'stamp', deallocate] },
        ],
      },
    },
    /** Confirmed absent after it was ready: kept with its uses, never silently recreated. */
    lost: heldAfterLoss,
    /** Present but not the incarnation Berth recorded (restarted behind its back): reported, not adopted. */
    fenced: heldAfterLoss,
    /** The provider confirmed nothing was created for this intent. */
    failed: { type: 'final' },
    released: { type: 'final' },
  },
});

export type AllocationSnapshot = SnapshotFrom<typeof allocationMachine>;

export const finished = (snapshot: AllocationSnapshot): boolean => snapshot.status === 'done';

/**
 * For the maintenance loop: when an idle release (`reason: 'idle'`) becomes acceptable, or null when it never can
 * as things stand (borrowed, uses held, provider call in flight, or not in a releasable state).
 */
export const reclaimableAt = ({ state, context }: MachineView<AllocationContext>): number | null => {
  if (state !== 'ready' && state !== 'lost' && state !== 'fenced') return null;
  if (context.call !== null || blockingUses(context).length > 0) return null;
  return reclaimableSince(context);
};

/** The typed error for an event the allocation does not accept in its current state. */
export const reject = (snapshot: AllocationSnapshot, event: IncomingEvent): Rejection => {
  const state = snapshot.value;
  const { context } = snapshot;
  const uses = Object.keys(context.uses);
  const detail = { state, allocationId: context.id, call: context.call, uses: uses.length };
  const at = typeof event.at === 'number' ? event.at : context.updatedAt;
  if (event.type === 'allocation.intended') {
    // Recovery re-sends intents: say what the sender may have missed (see AllocationIntendParams).
    const environmentEvent = environmentEventFor(context, state, at);
    return {
      code: 'invalid_state',
      message: 'The allocation was already intended.',
      detail: {
        ...detail,
        reason: 'already_intended',
        requestId: context.requestId,
        ...(environmentEvent ? { environmentEvent } : {}),
      },
    };
  }
  if (state === 'pristine') return { code: 'not_found', message: 'The allocation does not exist.', detail };
  const busy = (message: string): Rejection => ({ code: 'environment_busy', message, detail });
  const invalid = (message: string, reason: string): Rejection => ({
    code: 'invalid_state',
    message,
    detail: { ...detail, reason },
  });
  switch (event.type) {
    case 'allocation.use_acquired':
      if (state === 'releasing') return busy('The allocation is being released; admission is closed.');
      if (state === 'requested' || state === 'pending' || state === 'unknown') {
        return invalid('The allocation is not ready.', 'not_ready');
      }
      return { code: 'stale_target', message: `The allocation is ${state}; acquire a new one.`, detail };
    case 'allocation.use_released':
      return invalid('The allocation holds no such use.', 'not_held');
    case 'allocation.release_requested':
      if (state === 'releasing') return busy('The allocation is already being released.');
      if (snapshot.status === 'done') return invalid(`The allocation is already ${state}.`, 'finished');
      if (blockingUses(context).length > 0) return busy('The allocation has active uses.');
      if (context.call !== null) return busy(`A provider ${context.call} is in flight.`);
      if (context.ownership === 'borrowed') {
        return invalid('A borrowed allocation is never reclaimed for idleness.', 'borrowed');
      }
      if (reclaimableAt(viewOf(snapshot)) === null) {
        return invalid(`A ${state} allocation is released only explicitly.`, 'explicit_only');
      }
      return {
        code: 'invalid_state',
        message: 'The allocation has not been idle for its interval.',
        detail: { ...detail, reason: 'not_idle', reclaimableAt: reclaimableAt(viewOf(snapshot)) },
      };
    case 'allocation.claimed': {
      // A claim sent again (recovery of the environment that made it): say what that environment may have missed.
      const again = context.environmentId === event.environmentId && context.generation === event.generation;
      const environmentEvent = again ? environmentEventFor(context, state, at) : null;
      if (environmentEvent) {
        // The version the claim recorded: the one to show again, whatever is active now.
        const contentVersion = context.contentVersion ?? null;
        return { code: 'invalid_state', message: 'The allocation was already claimed.', detail: { ...detail, reason: 'already_claimed', environmentEvent, contentVersion } };
      }
      return invalid('The allocation is not a ready pooled allocation nobody uses.', 'not_claimable');
    }
    case 'allocation.resume_requested':
      if (context.call !== null) return busy(`A provider ${context.call} is in flight.`);
      if (uses.length > 0) return invalid('An allocation with uses is never restarted.', 'has_uses');
      return invalid('Only a pending allocation can be resumed.', 'not_pending');
    case 'allocation.reconcile_requested':
      if (context.call !== null) return busy(`A provider ${context.call} is in flight.`);
      return invalid(`Nothing to reconcile while ${state}.`, 'nothing_to_reconcile');
    case 'allocation.reported':
    case 'allocation.deallocated':
      return invalid('No matching provider call is in flight.', 'no_call_in_flight');
    default:
      return invalid(`The allocation does not accept ${event.type} while ${state}.`, 'unexpected');
  }
};
