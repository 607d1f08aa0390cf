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
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { EnvironmentEvent } from '../../schemas/events/environment.ts';
import type { Profile } from '../../schemas/profile.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export type ReusePolicy = 'session' | 'workspace' | 'scope';

/** The intent of the current (or under way) allocation, kept so recovery can re-send it unchanged. */
export interface Acquisition {
  allocationId: string;
  requestId: string;
  generation: number;
  profile: Profile;
}

export interface EnvironmentContext {
  id: string;
  name: string;
  slug: string;
  scope: string;
  description: string | null;
  entry: string | null;
  profile: Profile;
  /** The profile's reuse policy, or its provider's default: docker shares per session, native per scope (seed 000). */
  reuse: ReusePolicy;
  /** The last execution generation handed out; each new allocation gets this + 1, so it only grows. */
  generation: number;
  acquisition: Acquisition | null;
  createdAt: number;
  updatedAt: number;
}

/**
 * `allocation.intend`: create the allocation actor by sending it `allocation.intended` {environmentId, requestId,
 * generation, profile, at}. Also sent again by recovery (re-sending the same intent is idempotent): when the
 * allocation already exists it rejects with `invalid_state`, `detail.reason = 'already_intended'`, and
 * `detail.environmentEvent` (if any) is the notification this environment may have missed; the handler returns it
 * so it is sent back here (a rejection of that one, `invalid_state`, means the environment already knew).
 */
export interface AllocationIntendParams {
  allocationId: string;
  requestId: string;
  environmentId: string;
  generation: number;
  profile: Profile;
}

const defaultReuse = (profile: Profile): ReusePolicy =>
  profile.reuse ?? (profile.provider === 'docker' ? 'session' : 'scope');

/** Every state that names an acquisition has one (set by `startAcquisition`, cleared only on the way to idle). */
const intend = {
  type: 'allocation.intend',
  params: ({ context }: { context: EnvironmentContext }): AllocationIntendParams => {
    const { allocationId, requestId, generation, profile } = context.acquisition!;
    return { allocationId, requestId, environmentId: context.id, generation, profile };
  },
} as const;

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
  },
  actions: {
    'allocation.intend': effect<AllocationIntendParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    create: assign(({ event }) => {
      if (event.type !== 'environment.created') return {};
      const { name, slug, scope, profile, description, entry, at } = event;
      const text = { description: description ?? null, entry: entry ?? null };
      return { name, slug, scope, profile, ...text, reuse: defaultReuse(profile), createdAt: at };
    }),
    update: assign(({ context, event }) => {
      if (event.type !== 'environment.updated') return {};
      const profile = event.profile ?? context.profile;
      return {
        name: event.name ?? context.name,
        slug: event.slug ?? context.slug,
        profile,
        reuse: defaultReuse(profile),
        description: event.description === undefined ? context.description : event.description,
        entry: event.entry === undefined ? context.entry : event.entry,
      };
    }),
    startAcquisition: assign(({ context, event }) => {
      if (event.type !== 'environment.acquisition_requested') return {};
      const { allocationId, requestId, generation } = event;
      return { generation, acquisition: { allocationId, requestId, generation, profile: context.profile } };
    }),
    clearAcquisition: assign({ acquisition: null }),
  },
});

const update = { actions: ['update', 'stamp'] } as const;
const remove = { target: 'deleted', actions: 'stamp' } as const;
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
    profile: { provider: 'native' },
    reuse: 'scope',
    generation: 0,
    acquisition: null,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: { 'environment.created': { target: 'idle', actions: ['create', 'stamp'] } },
    },
    idle: {
      on: { 'environment.updated': update, 'environment.deleted': remove, 'environment.acquisition_requested': acquire },
    },
    acquiring: {
      on: {
        'environment.updated': update,
        'environment.allocated': reported('allocated'),
        'environment.allocation_failed': released,
        'environment.allocation_lost': reported('lost'),
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': { actions: intend },
      },
    },
    allocated: {
      on: {
        'environment.updated': update,
        'environment.allocation_lost': reported('lost'),
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': { actions: intend },
      },
    },
    releasing: {
      on: {
        'environment.updated': update,
        'environment.allocation_released': released,
        'runtime.recovered': { actions: intend },
      },
    },
    /** The allocation is confirmed gone (or fenced): a new acquisition is allowed; the lost one keeps its uses. */
    lost: {
      on: {
        'environment.updated': update,
        'environment.deleted': remove,
        'environment.acquisition_requested': acquire,
        'environment.allocation_releasing': reported('releasing'),
        'environment.allocation_released': released,
        'runtime.recovered': { actions: intend },
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
  snapshot.status === 'done' || snapshot.value === 'idle';

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
  if (event.type === 'environment.deleted') {
    return { code: 'environment_busy', message: 'The environment has an allocation; release it first.', detail };
  }
  if (notifications.has(event.type) && event.allocationId !== acquisition?.allocationId) {
    return { code: 'stale_target', message: 'That allocation is not the environment\'s current one.', detail };
  }
  return { code: 'invalid_state', message: `The environment does not accept ${event.type} while ${state}.`, detail };
};
