/**
 * The session actor (stream `session-<id>`): which Environment (and Workspace) a series of executions uses.
 * Creating, inheriting, forking or changing a selection never allocates: the machine names no effect at all.
 *
 * Environment selection at creation (seed 000): an explicit id selects it; explicit null disables the configured
 * default; absent inherits the parent's (or forked session's) selection, else takes the configured default, else
 * none. A change compares the selection the caller observed. Tool turns on the session's workspace are their own
 * actors (turn.machine.ts, naming the session): the session does not keep a second count of them.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { SessionEvent } from '../../schemas/events/session.ts';
import type { ReusePolicy } from '../../schemas/profile.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

/** How the current selection came about (audit, and so a UI can say "inherited" or "default"). */
export type SelectionSource = 'explicit' | 'profile' | 'disabled' | 'inherited' | 'default' | 'none';

export interface SessionContext {
  id: string;
  scope: string;
  environmentId: string | null;
  environmentSource: SelectionSource;
  /** The reuse policy that selected the environment from a profile (`session`: the environment is this session's). */
  environmentReuse: ReusePolicy | null;
  workspaceId: string | null;
  /** The workspace's binding generation the session was bound to (null without a workspace). */
  workspaceGeneration: number | null;
  /** Where its commands and tools start, relative to the workspace root ('' the root). */
  cwd: string;
  parent: { sessionId: string; relation: 'child' | 'fork' } | null;
  createdAt: number;
  updatedAt: number;
}

type Created = Extract<SessionEvent, { type: 'session.created' }>;

const selectEnvironment = (e: Created): Pick<SessionContext, 'environmentId' | 'environmentSource'> => {
  if (e.environmentReuse && e.environmentId) return { environmentId: e.environmentId, environmentSource: 'profile' };
  if (e.environmentId !== undefined) {
    return { environmentId: e.environmentId, environmentSource: e.environmentId === null ? 'disabled' : 'explicit' };
  }
  if (e.parent) return { environmentId: e.parent.environmentId, environmentSource: 'inherited' };
  if (e.defaultEnvironmentId !== undefined) return { environmentId: e.defaultEnvironmentId, environmentSource: 'default' };
  return { environmentId: null, environmentSource: 'none' };
};

/** An explicit workspace (or null) is the creator's; absent inherits the parent's binding as it was recorded. */
const selectWorkspace = (e: Created): Pick<SessionContext, 'workspaceId' | 'workspaceGeneration' | 'cwd'> => {
  if (e.workspaceId !== undefined) {
    return { workspaceId: e.workspaceId, workspaceGeneration: e.workspaceId === null ? null : (e.workspaceGeneration ?? null), cwd: e.cwd ?? '' };
  }
  if (e.parent) return { workspaceId: e.parent.workspaceId, workspaceGeneration: e.parent.workspaceGeneration ?? null, cwd: e.cwd ?? e.parent.cwd ?? '' };
  return { workspaceId: null, workspaceGeneration: null, cwd: '' };
};

export const sessionMachine = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as { id: string },
  },
  guards: {
    canChangeEnvironment: ({ context, event }) =>
      event.type === 'session.environment_changed' &&
      event.previous === context.environmentId &&
      event.next !== event.previous,
  },
  actions: {
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    create: assign(({ event }) => {
      if (event.type !== 'session.created') return {};
      return {
        scope: event.scope,
        ...selectEnvironment(event),
        environmentReuse: event.environmentReuse ?? null,
        ...selectWorkspace(event),
        parent: event.parent ? { sessionId: event.parent.sessionId, relation: event.parent.relation } : null,
        createdAt: event.at,
      };
    }),
    changeEnvironment: assign(({ event }) =>
      event.type === 'session.environment_changed'
        ? { environmentId: event.next, environmentSource: event.next === null ? 'disabled' : 'explicit' }
        : {},
    ),
  },
}).createMachine({
  id: 'session',
  context: ({ input }) => ({
    id: input.id,
    scope: '',
    environmentId: null,
    environmentSource: 'none',
    environmentReuse: null,
    workspaceId: null,
    workspaceGeneration: null,
    cwd: '',
    parent: null,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: { 'session.created': { target: 'active', actions: ['create', 'stamp'] } },
    },
    active: {
      on: {
        'session.environment_changed': { guard: 'canChangeEnvironment', actions: ['changeEnvironment', 'stamp'] },
        'session.deleted': { target: 'deleted', actions: 'stamp' },
      },
    },
    // Its executions and turns keep their own records.
    deleted: { type: 'final' },
  },
});

export type SessionSnapshot = SnapshotFrom<typeof sessionMachine>;

/** A session has no effects, so nothing to reconcile after a restart. */
export const finished = (_snapshot: SessionSnapshot): boolean => true;

/** The typed error for an event the session does not accept. */
export const reject = (snapshot: SessionSnapshot, event: IncomingEvent): Rejection => {
  const { context } = snapshot;
  const detail = { state: snapshot.value, environmentId: context.environmentId };
  if (event.type === 'session.created') {
    return { code: 'invalid_state', message: 'The session already exists.', detail: { ...detail, reason: 'exists' } };
  }
  if (snapshot.value === 'pristine' || snapshot.value === 'deleted') return { code: 'not_found', message: 'The session does not exist.', detail };
  if (event.type === 'session.environment_changed') {
    if (event.previous !== context.environmentId) {
      return {
        code: 'invalid_state',
        message: 'The session\'s Environment changed since it was read.',
        detail: { ...detail, reason: 'previous_mismatch' },
      };
    }
    const message = 'The session already selects that Environment.';
    return { code: 'invalid_state', message, detail: { ...detail, reason: 'unchanged' } };
  }
  return { code: 'invalid_state', message: `The session does not accept ${event.type}.`, detail };
};
