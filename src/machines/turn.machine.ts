/**
 * The turn actor (stream `turn-<id>`, issue 13): serialized tool work on a workspace storage. `open` admits tool
 * calls and shell executions; `closing` admits none and waits for the admitted ones; `released` is final (a turn is
 * never reopened). The turn remembers its shell executions so that its release waits for them to be terminal and
 * records what each changed; which are terminal is the service's to ask (machines read no other stream).
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { TurnEvent } from '../../schemas/events/turn.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface TurnExecution {
  executionId: string;
  /** The manifest taken before it ran (artifact digest), when there is one. */
  manifest: string | null;
  /** Its changes are in the workspace history. */
  recorded: boolean;
}

export interface TurnContext {
  id: string;
  scope: string;
  sessionId: string;
  workspaceId: string;
  generation: number;
  ownership: string;
  executions: TurnExecution[];
  cleared: boolean;
  createdAt: number;
  updatedAt: number;
}

export const turnMachine = setup({
  types: { context: {} as TurnContext, events: {} as TurnEvent, input: {} as { id: string } },
  actions: {
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    open: assign(({ event }) =>
      event.type === 'turn.opened'
        ? { scope: event.scope, sessionId: event.sessionId, workspaceId: event.workspaceId, generation: event.generation, ownership: event.ownership, createdAt: event.at }
        : {},
    ),
    admit: assign({
      executions: ({ context, event }) =>
        event.type === 'turn.execution_admitted' && !context.executions.some((x) => x.executionId === event.executionId)
          ? [...context.executions, { executionId: event.executionId, manifest: event.manifest ?? null, recorded: false }]
          : context.executions,
    }),
    record: assign({
      executions: ({ context, event }) =>
        context.executions.map((x) => (event.type === 'turn.execution_recorded' && x.executionId === event.executionId ? { ...x, recorded: true } : x)),
    }),
    release: assign({ cleared: ({ event }) => event.type === 'turn.released' && event.cleared === true }),
  },
  guards: {
    unrecorded: ({ context, event }) =>
      event.type === 'turn.execution_recorded' && context.executions.some((x) => x.executionId === event.executionId && !x.recorded),
  },
}).createMachine({
  id: 'turn',
  context: ({ input }) => ({
    id: input.id,
    scope: '',
    sessionId: '',
    workspaceId: '',
    generation: 0,
    ownership: '',
    executions: [],
    cleared: false,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: { on: { 'turn.opened': { target: 'open', actions: ['open', 'stamp'] } } },
    open: {
      on: {
        'turn.execution_admitted': { actions: ['admit', 'stamp'] },
        'turn.execution_recorded': { guard: 'unrecorded', actions: ['record', 'stamp'] },
        'turn.closing': { target: 'closing', actions: 'stamp' },
        'turn.released': { target: 'released', actions: ['release', 'stamp'] },
      },
    },
    closing: {
      on: {
        'turn.execution_recorded': { guard: 'unrecorded', actions: ['record', 'stamp'] },
        'turn.released': { target: 'released', actions: ['release', 'stamp'] },
      },
    },
    released: { type: 'final' },
  },
});

export type TurnSnapshot = SnapshotFrom<typeof turnMachine>;

/** No effects: a turn left open by a crash stays open (its storage held) until it is released or cleared. */
export const finished = (_snapshot: TurnSnapshot): boolean => true;

export const reject = (snapshot: TurnSnapshot, event: IncomingEvent): Rejection => {
  const detail = { state: snapshot.value, type: event.type };
  if (snapshot.value === 'pristine') return { code: 'not_found', message: 'No such turn.', detail };
  if (event.type === 'turn.opened') return { code: 'invalid_state', message: 'The turn is already open.', detail: { ...detail, reason: 'exists' } };
  if (snapshot.value === 'released') return { code: 'invalid_state', message: 'The turn is released; a released turn is never reopened.', detail: { ...detail, reason: 'released' } };
  return { code: 'invalid_state', message: 'The turn is closing: it admits no new call.', detail: { ...detail, reason: 'closing' } };
};
