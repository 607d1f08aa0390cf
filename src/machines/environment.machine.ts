/**
 * The Environment actor (stream `environment-<henv_…>`): the catalog record (name, slug, profile, reuse policy) and
 * the coalesced acquisition of its one current allocation. Selecting an Environment never allocates; only
 * `environment.acquisition_requested` does, and its effect creates the allocation actor, which reports back here.
 *
 * Acquisition protocol (coalescing): a caller reads the snapshot first.
 * - `allocated`: use `currentTarget(snapshot)`; nothing is requested.
 * - `idle` or `lost`: send `environment.acquisition_requested` with fresh ids and `generation` = last + 1.
 * - `acquiring`: do not request; wait for `environment.allocated` (or `allocation_failed`) on this stream. The
 *   writing runtime joins the acquisition already under way instead of starting another.
 * - `releasing`: wait for `environment.allocation_released`, then request.
 * A request that races another is rejected with `environment_busy`; its detail names the state and the allocation
 * under way, so the loser waits on that one.
 *
 * Content (seed 001 §4), in every live state and independent of allocation: `environment.build_requested` starts
 * the next version's build (one at a time: `environment_busy`) and creates its build actor; the build actor reports
 * `environment.build_finished`, and a ready build becomes the active version (a failed one changes nothing);
 * `environment.version_activated` switches to another ready version. Deleting is refused while a build runs.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { EnvironmentEvent } from '../../schemas/events/environment.ts';
import { defaultsBeforeRecorded, emptyProfile, type Profile, type ReusePolicy } from '../../schemas/profile.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

/** The intent of the current (or under way) allocation, kept so recovery can re-send it unchanged. */
export interface Acquisition {
  allocationId: string;
  requestId: string;
  generation: number;
  profile: Profile;
  /** A warm pool's ready allocation, claimed instead of intended. */
  pooled?: true;
}

/** One build as the environment keeps it (its log and package list are the build actor's). */
export interface VersionSummary {
  version: number;
  status: 'building' | 'ready' | 'failed';
  startedAt: number;
  finishedAt: number | null;
  packages: number;
  sizeBytes: number;
  error: string;
}

export interface EnvironmentContext {
  id: string;
  name: string;
  slug: string;
  scope: string;
  description: string | null;
  entry: string | null;
  profile: Profile;
  /** The profile's reuse policy, or its provider's default (Provider.defaultReuse, recorded with the profile). */
  reuse: ReusePolicy;
  /** The last execution generation handed out; each new allocation gets this + 1, so it only grows. */
  generation: number;
  acquisition: Acquisition | null;
  /** Every build, in version order. */
  versions: VersionSummary[];
  /** The last version number handed out (0: never built). */
  latestVersion: number;
  /** The version whose build is running, if any. */
  building: number | null;
  /** The version sessions read at /env/<slug>, if any. */
  activeVersion: number | null;
  createdAt: number;
  updatedAt: number;
}

/**
 * `allocation.intend`: create the allocation actor by sending it `allocation.intended` {environmentId, requestId,
 * generation, profile, at}. Also sent again by recovery (re-sending the same intent is idempotent): when the
 * allocation already exists it rejects with `invalid_state`, `detail.reason = 'already_intended'`, and
 * `detail.environmentEvent` (if any) is the notification this environment may have missed; the handler returns it
 * so it is sent back here, unless it is the one `reflected` names (the environment's state already says so).
 */
export interface AllocationIntendParams {
  allocationId: string;
  requestId: string;
  environmentId: string;
  generation: number;
  profile: Profile;
  /**
   * The allocation is a warm pool's: the handler sends `allocation.claimed` {environmentId, generation} instead; a
   * claim refused as `already_claimed` returns its `detail.environmentEvent` like a missed intent, and any other
   * refusal (another claim won, the container was found gone) returns `environment.allocation_failed`.
   */
  pooled?: true;
  /**
   * Sent by recovery: the allocation's notification that the environment's state already reflects. Returned anyway,
   * it was refused, and every restart logged a warning with a stack for each allocated environment.
   */
  reflected?: 'environment.allocated' | 'environment.allocation_releasing' | 'environment.allocation_lost';
}

/** `build.start`: create the build actor by sending it `build.requested` (with the runtime that runs it). */
export interface BuildStartParams {
  environmentId: string;
  version: number;
  scope: string;
  slug: string;
  profile: Profile;
}

/**
 * `build.reconcile` (recovery of a build under way): if the build actor never got its request, report
 * `environment.build_finished` failed (interrupted); if it finished, report its outcome (a missed notification); if
 * it is still building, nothing (its own recovery fails it and reports).
 */
export interface BuildReconcileParams {
  environmentId: string;
  version: number;
}

/** The policy recorded with the profile; events written before it was recorded had their provider kind's default. */
const reuseOf = (recorded: ReusePolicy | undefined, profile: Profile): ReusePolicy =>
  recorded ?? profile.reuse ?? defaultsBeforeRecorded[profile.provider].reuse;

/** Every state that names an acquisition has one (set by `startAcquisition`, cleared only on the way to idle). */
const intendReflecting = (reflected?: AllocationIntendParams['reflected']) =>
  ({
    type: 'allocation.intend',
    params: ({ context }: { context: EnvironmentContext }): AllocationIntendParams => {
      const { allocationId, requestId, generation, profile, pooled } = context.acquisition!;
      return { allocationId, requestId, environmentId: context.id, generation, profile, ...(pooled ? { pooled } : {}), ...(reflected ? { reflected } : {}) };
    },
  }) as const;
const intend = intendReflecting();

const buildStart = {
  type: 'build.start',
  params: ({ context }: { context: EnvironmentContext }): BuildStartParams => ({
    environmentId: context.id,
    version: context.building!,
    scope: context.scope,
    slug: context.slug,
    profile: context.profile,
  }),
} as const;

const buildReconcile = {
  type: 'build.reconcile',
  params: ({ context }: { context: EnvironmentContext }): BuildReconcileParams => ({ environmentId: context.id, version: context.building! }),
} as const;

const readyVersion = (context: EnvironmentContext, version: number): boolean =>
  context.versions.some((v) => v.version === version && v.status === 'ready');

const environmentSetup = setup({
  types: {
    context: {} as EnvironmentContext,
    events: {} as EnvironmentEvent,
    input: {} as { id: string },
  },
  guards: {
    isNextGeneration: ({ context, event }) =>
      event.type === 'environment.acquisition_requested' && event.generation === context.generation + 1,
    isCurrentAllocation: ({ context, event }) =>
      'allocationId' in event && event.type !== 'environment.acquisition_requested' &&
      event.allocationId === context.acquisition?.allocationId &&
      (event.type !== 'environment.allocated' || event.generation === context.acquisition.generation),
    isNextBuild: ({ context, event }) =>
      event.type === 'environment.build_requested' && context.building === null && event.version === context.latestVersion + 1,
    isCurrentBuild: ({ context, event }) => event.type === 'environment.build_finished' && event.version === context.building,
    isReadyVersion: ({ context, event }) => event.type === 'environment.version_activated' && readyVersion(context, event.version),
    isBuilding: ({ context }) => context.building !== null,
    isNotBuilding: ({ context }) => context.building === null,
  },
  actions: {
    'allocation.intend': effect<AllocationIntendParams>(),
    'build.start': effect<BuildStartParams>(),
    'build.reconcile': effect<BuildReconcileParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    create: assign(({ event }) => {
      if (event.type !== 'environment.created') return {};
      const { name, slug, scope, profile, description, entry, at } = event;
      const text = { description: description ?? null, entry: entry ?? null };
      return { name, slug, scope, profile, ...text, reuse: reuseOf(event.reuse, profile), createdAt: at };
    }),
    update: assign(({ context, event }) => {
      if (event.type !== 'environment.updated') return {};
      const profile = event.profile ?? context.profile;
      return {
        name: event.name ?? context.name,
        slug: event.slug ?? context.slug,
        profile,
        reuse: event.profile ? reuseOf(event.reuse, event.profile) : context.reuse,
        description: event.description === undefined ? context.description : event.description,
        entry: event.entry === undefined ? context.entry : event.entry,
      };
    }),
    startAcquisition: assign(({ context, event }) => {
      if (event.type !== 'environment.acquisition_requested') return {};
      const { allocationId, requestId, generation, pooled } = event;
      return { generation, acquisition: { allocationId, requestId, generation, profile: context.profile, ...(pooled ? { pooled } : {}) } };
    }),
    clearAcquisition: assign({ acquisition: null }),
    startBuild: assign(({ context, event }) => {
      if (event.type !== 'environment.build_requested') return {};
      const summary: VersionSummary = {
        version: event.version,
        status: 'building',
        startedAt: event.at,
        finishedAt: null,
        packages: 0,
        sizeBytes: 0,
        error: '',
      };
      return { building: event.version, latestVersion: event.version, versions: [...context.versions, summary] };
    }),
    finishBuild: assign(({ context, event }) => {
      if (event.type !== 'environment.build_finished') return {};
      const { version, status, error, packages, sizeBytes, startedAt, at } = event;
      const versions = context.versions.map((v) =>
        v.version === version ? { ...v, status, error, packages, sizeBytes, startedAt: startedAt ?? v.startedAt, finishedAt: at } : v,
      );
      return { versions, building: null, activeVersion: status === 'ready' ? version : context.activeVersion };
    }),
    activate: assign(({ event }) => (event.type === 'environment.version_activated' ? { activeVersion: event.version } : {})),
  },
});

const update = { actions: ['update', 'stamp'] } as const;
const remove = { guard: 'isNotBuilding', target: 'deleted', actions: 'stamp' } as const;
/** Content events, accepted in every live state. */
const content = {
  'environment.build_requested': { guard: 'isNextBuild', actions: ['startBuild', 'stamp', buildStart] },
  'environment.build_finished': { guard: 'isCurrentBuild', actions: ['finishBuild', 'stamp'] },
  'environment.version_activated': { guard: 'isReadyVersion', actions: ['activate', 'stamp'] },
} as const;
/** Recovery while an allocation is named: re-send its intent, and reconcile a build under way. */
const recoverAllocated = (reflected?: AllocationIntendParams['reflected']) => {
  const again = intendReflecting(reflected);
  return [{ guard: 'isBuilding', actions: [again, buildReconcile] }, { actions: again }] as const;
};
const acquire = { guard: 'isNextGeneration', target: 'acquiring', actions: ['startAcquisition', 'stamp', intend] } as const;
/** The allocation actor reports a state of the current allocation. */
const reported = (target: 'allocated' | 'lost' | 'releasing') =>
  ({ guard: 'isCurrentAllocation', target, actions: 'stamp' }) as const;
/** Nothing is allocated any more (failed, or released): back to idle; the generation stays spent. */
const released = { guard: 'isCurrentAllocation', target: 'idle', actions: ['clearAcquisition', 'stamp'] } as const;

export const environmentMachine = environmentSetup.createMachine({
  id: 'environment',
  context: ({ input }) => ({
    id: input.id,
    name: '',
    slug: '',
    scope: '',
    description: null,
    entry: null,
    profile: emptyProfile,
    reuse: 'scope',
    generation: 0,
    acquisition: null,
    versions: [],
    latestVersion: 0,
    building: null,
    activeVersion: null,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: { 'environment.created': { target: 'idle', actions: ['create', 'stamp'] } },
    },
    idle: {
      on: {
        ...content,
        'environment.updated': update,
        'environment.deleted': remove,
        'environment.acquisition_requested': acquire,
        'runtime.recovered': { guard: 'isBuilding', actions: buildReconcile },
      },
    },
    acquiring: {
      on: {
        ...content,
        'environment.updated': update,
        'environment.allocated': reported('allocated'),
        'environment.allocation_failed': released,
        'environment.allocation_lost': reported('lost'),
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': recoverAllocated(),
      },
    },
    allocated: {
      on: {
        ...content,
        'environment.updated': update,
        'environment.allocation_lost': reported('lost'),
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': recoverAllocated('environment.allocated'),
      },
    },
    releasing: {
      on: {
        ...content,
        'environment.updated': update,
        'environment.allocation_released': released,
        'runtime.recovered': recoverAllocated('environment.allocation_releasing'),
      },
    },
    /** The allocation is confirmed gone (or fenced): a new acquisition is allowed; the lost one keeps its uses. */
    lost: {
      on: {
        ...content,
        'environment.updated': update,
        'environment.deleted': remove,
        'environment.acquisition_requested': acquire,
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': recoverAllocated('environment.allocation_lost'),
      },
    },
    deleted: { type: 'final' },
  },
});

export type EnvironmentSnapshot = SnapshotFrom<typeof environmentMachine>;

/** The target executions and mounts may name, only while the allocation is ready and admitting. */
export const currentTarget = (
  snapshot: EnvironmentSnapshot,
): { environmentId: string; allocationId: string; generation: number } | null => {
  const a = snapshot.context.acquisition;
  return snapshot.value === 'allocated' && a
    ? { environmentId: snapshot.context.id, allocationId: a.allocationId, generation: a.generation }
    : null;
};

/** Reconciliation is needed while an allocation is named: recovery re-sends its intent to learn what was missed. */
export const finished = (snapshot: EnvironmentSnapshot): boolean =>
  snapshot.status === 'done' || (snapshot.value === 'idle' && snapshot.context.building === null);

const notifications = new Set([
  'environment.allocated',
  'environment.allocation_failed',
  'environment.allocation_lost',
  'environment.allocation_releasing',
  'environment.allocation_released',
]);

/** The typed error for an event the environment does not accept in its current state. */
export const reject = (
  snapshot: EnvironmentSnapshot,
  event: IncomingEvent,
): Rejection => {
  const state = snapshot.value;
  const { acquisition, generation } = snapshot.context;
  const detail = { state, allocationId: acquisition?.allocationId, generation: acquisition?.generation };
  if (event.type === 'environment.created') {
    return { code: 'invalid_state', message: 'The environment already exists.', detail: { state, reason: 'exists' } };
  }
  if (state === 'pristine' || state === 'deleted') {
    return { code: 'environment_not_found', message: 'The environment does not exist.', detail: { state } };
  }
  if (event.type === 'environment.acquisition_requested') {
    if (state === 'acquiring' || state === 'allocated' || state === 'releasing') {
      const message =
        state === 'acquiring'
          ? 'An allocation is already being acquired; wait for it.'
          : state === 'allocated'
            ? 'The environment is already allocated; use its target.'
            : 'The allocation is being released; acquire once it is released.';
      return { code: 'environment_busy', message, detail };
    }
    return {
      code: 'invalid_state',
      message: 'The requested generation is not the next one.',
      detail: { state, expectedGeneration: generation + 1, requestedGeneration: event.generation },
    };
  }
  const content = rejectContent(snapshot.context, event);
  if (content) return content;
  if (event.type === 'environment.deleted') {
    return { code: 'environment_busy', message: 'The environment has an allocation; release it first.', detail };
  }
  if (notifications.has(event.type) && event.allocationId !== acquisition?.allocationId) {
    return { code: 'stale_target', message: 'That allocation is not the environment\'s current one.', detail };
  }
  return { code: 'invalid_state', message: `The environment does not accept ${event.type} while ${state}.`, detail };
};

/** Why a content event (or a delete during a build) is refused, or undefined when it is not one of those. */
function rejectContent(context: EnvironmentContext, event: IncomingEvent): Rejection | undefined {
  const { building, latestVersion } = context;
  switch (event.type) {
    case 'environment.build_requested':
      if (building !== null) return { code: 'environment_busy', message: `Version ${building} is being built; one build runs at a time.`, detail: { building } };
      return { code: 'invalid_state', message: 'The requested version is not the next one.', detail: { expectedVersion: latestVersion + 1, requestedVersion: event.version } };
    case 'environment.build_finished':
      return { code: 'invalid_state', message: 'That build is not the one under way.', detail: { building, version: event.version } };
    case 'environment.version_activated': {
      const found = context.versions.find((v) => v.version === event.version);
      if (!found) return { code: 'not_found', message: 'The environment has no such version.', detail: { version: event.version, latestVersion } };
      return {
        code: 'environment_not_ready',
        message: `Version ${found.version} is ${found.status}; only a finished (ready) build can be activated.`,
        detail: { version: found.version, status: found.status },
      };
    }
    case 'environment.deleted':
      return building === null ? undefined : { code: 'environment_busy', message: `Version ${building} is being built; delete once it finishes.`, detail: { building } };
  }
  return undefined;
}
