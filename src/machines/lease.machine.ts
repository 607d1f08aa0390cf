/**
 * The lease actor (stream `lease-<id>`, issue 15, seed 003): a unit of work bound to a machine it acquires lazily.
 *
 *   unbound ─bound→ running ⇄ paused ⇄ held; any ─release_requested→ releasing ─released→ released
 *
 * Rules encoded here:
 * - binding allocates nothing; the private environment is recorded once (its one allocation is the lease's machine,
 *   so the lease never has two);
 * - a pause records its cause, its attempt (the count of pauses), when it began and the time its timer resumes it
 *   (`retryAt`, persisted: a restart keeps it); a hold stops the timer until a resume; pauses and holds keep the lease;
 * - a reclaimed machine is recorded only while paused or held (the pause outlasted the idle interval);
 * - a deadline (set, moved or cleared while the lease lives) releases it when due: the maintenance loop asks;
 * - release removes the private environment (its allocation, the workspace view saved first) by an effect that
 *   recovery runs again until it reports `released`.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { LeaseEvent, PauseCause, Work } from '../../schemas/events/lease.ts';
import type { Profile } from '../../schemas/profile.ts';
import { emptyProfile } from '../../schemas/profile.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface LeasePause {
  state: 'paused' | 'held';
  cause: PauseCause;
  attempt: number;
  pausedAt: number;
  retryAt: number | null;
}

export interface LeaseContext {
  id: string;
  scope: string;
  /** Who bound it (leases bound before roles were recorded act as members: never more than asked). */
  role: 'admin' | 'member';
  key: string;
  work: Work;
  profile: Profile;
  workspaceId: string | null;
  env: Record<string, string>;
  idleSeconds: number;
  environmentId: string | null;
  sessionId: string | null;
  /** The machine last acquired (its allocation and generation); null before the first acquire and once reclaimed. */
  machine: { allocationId: string; generation: number } | null;
  pause: LeasePause | null;
  /** When the maintenance loop releases it (ms since the epoch), or null. */
  deadline: number | null;
  /** Pauses so far (a pause's attempt). */
  pauses: number;
  createdAt: number;
  updatedAt: number;
}

/** `lease.remove`: delete the private environment (releasing its allocation, views saved first); report `lease.released`. */
export interface RemoveParams {
  leaseId: string;
  scope: string;
  environmentId: string | null;
}

const remove = {
  type: 'lease.remove',
  params: ({ context }: { context: LeaseContext }): RemoveParams => ({ leaseId: context.id, scope: context.scope, environmentId: context.environmentId }),
} as const;

const leaseSetup = setup({
  types: { context: {} as LeaseContext, events: {} as LeaseEvent, input: {} as { id: string } },
  actions: {
    'lease.remove': effect<RemoveParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    bind: assign(({ event }) => {
      if (event.type !== 'lease.bound') return {};
      return {
        scope: event.scope,
        role: event.role ?? 'member',
        key: event.key,
        work: event.work,
        profile: event.profile,
        workspaceId: event.workspaceId ?? null,
        env: event.env ?? {},
        idleSeconds: event.idleSeconds,
        createdAt: event.at,
      };
    }),
    makeEnvironment: assign(({ event }) =>
      event.type === 'lease.environment_made' ? { environmentId: event.environmentId, sessionId: event.sessionId ?? null } : {},
    ),
    acquire: assign(({ event }) => (event.type === 'lease.acquired' ? { machine: { allocationId: event.allocationId, generation: event.generation } } : {})),
    pause: assign(({ context, event }) => {
      if (event.type !== 'lease.paused') return {};
      const pause: LeasePause = { state: 'paused', cause: event.cause, attempt: context.pauses + 1, pausedAt: event.at, retryAt: event.retryAt ?? null };
      return { pause, pauses: context.pauses + 1 };
    }),
    hold: assign(({ context, event }) => {
      if (event.type !== 'lease.held') return {};
      // Held from running: a pause of its own, caused by the hold; from a pause: the same pause, its timer stopped.
      const pause: LeasePause = context.pause
        ? { ...context.pause, state: 'held', retryAt: null }
        : { state: 'held', cause: { kind: 'held' }, attempt: context.pauses + 1, pausedAt: event.at, retryAt: null };
      return { pause, pauses: context.pause ? context.pauses : context.pauses + 1 };
    }),
    resume: assign({ pause: null }),
    setDeadline: assign(({ event }) => (event.type === 'lease.deadline_set' ? { deadline: event.deadline } : {})),
    reclaim: assign({ machine: null }),
  },
  guards: {
    noEnvironment: ({ context }) => context.environmentId === null,
    ownMachine: ({ context, event }) => event.type === 'lease.reclaimed' && context.machine?.allocationId === event.allocationId,
  },
});

const release = { 'lease.release_requested': { target: 'releasing', actions: ['stamp', remove] } } as const;
const made = { 'lease.environment_made': { guard: 'noEnvironment', actions: ['makeEnvironment', 'stamp'] } } as const;
const reclaimed = { 'lease.reclaimed': { guard: 'ownMachine', actions: ['reclaim', 'stamp'] } } as const;
const deadline = { 'lease.deadline_set': { actions: ['setDeadline', 'stamp'] } } as const;

export const leaseMachine = leaseSetup.createMachine({
  id: 'lease',
  context: ({ input }) => ({
    id: input.id,
    scope: '',
    role: 'member',
    key: '',
    work: { kind: '', id: '' },
    profile: emptyProfile,
    workspaceId: null,
    env: {},
    idleSeconds: 0,
    environmentId: null,
    sessionId: null,
    machine: null,
    pause: null,
    deadline: null,
    pauses: 0,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'unbound',
  states: {
    unbound: { on: { 'lease.bound': { target: 'running', actions: ['bind', 'stamp'] } } },
    running: {
      on: {
        ...made,
        'lease.acquired': { actions: ['acquire', 'stamp'] },
        'lease.paused': { target: 'paused', actions: ['pause', 'stamp'] },
        'lease.held': { target: 'held', actions: ['hold', 'stamp'] },
        ...deadline,
        ...release,
      },
    },
    paused: {
      on: {
        ...made,
        'lease.paused': { actions: ['pause', 'stamp'] },
        'lease.held': { target: 'held', actions: ['hold', 'stamp'] },
        'lease.resumed': { target: 'running', actions: ['resume', 'stamp'] },
        ...reclaimed,
        ...deadline,
        ...release,
      },
    },
    held: {
      on: {
        'lease.resumed': { target: 'running', actions: ['resume', 'stamp'] },
        ...reclaimed,
        ...deadline,
        ...release,
      },
    },
    releasing: {
      on: {
        'lease.released': { target: 'released', actions: 'stamp' },
        'runtime.recovered': { actions: ['stamp', remove] },
      },
    },
    released: { type: 'final' },
  },
});

export type LeaseSnapshot = SnapshotFrom<typeof leaseMachine>;

export const reject = (snapshot: LeaseSnapshot, event: IncomingEvent): Rejection => {
  const state = String(snapshot.value);
  const detail = { state, leaseId: snapshot.context.id, key: snapshot.context.key, type: event.type };
  if (state === 'unbound') return { code: 'not_found', message: 'No such lease.', detail };
  if (event.type === 'lease.bound') return { code: 'invalid_state', message: 'The lease is bound already.', detail: { ...detail, reason: 'bound' } };
  if (state === 'releasing' || state === 'released') return { code: 'invalid_state', message: `The lease is ${state}.`, detail: { ...detail, reason: state } };
  return { code: 'invalid_state', message: `The lease does not accept ${event.type} while ${state}.`, detail: { ...detail, reason: state } };
};
