/**
 * The harness actor (stream `harness-<id>`, seed 001 §5): its name, base and the environment its tasks read by
 * default. Whether that environment exists is checked by the caller when the harness is written, and again when a
 * task uses it; the machine keeps the reference as given.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { HarnessEvent } from '../../schemas/events/harness.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface HarnessContext {
  id: string;
  scope: string;
  name: string;
  base: string | null;
  environmentId: string | null;
  createdAt: number;
  updatedAt: number;
}

export const harnessMachine = setup({
  types: { context: {} as HarnessContext, events: {} as HarnessEvent, input: {} as { id: string } },
  actions: {
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    create: assign(({ event }) =>
      event.type === 'harness.created'
        ? { scope: event.scope, name: event.name, base: event.base ?? null, environmentId: event.environmentId ?? null, createdAt: event.at }
        : {},
    ),
    update: assign(({ context, event }) =>
      event.type === 'harness.updated'
        ? {
            name: event.name ?? context.name,
            base: event.base === undefined ? context.base : event.base,
            environmentId: event.environmentId === undefined ? context.environmentId : event.environmentId,
          }
        : {},
    ),
  },
}).createMachine({
  id: 'harness',
  context: ({ input }) => ({ id: input.id, scope: '', name: '', base: null, environmentId: null, createdAt: 0, updatedAt: 0 }),
  initial: 'pristine',
  states: {
    pristine: { on: { 'harness.created': { target: 'active', actions: ['create', 'stamp'] } } },
    active: {
      on: {
        'harness.updated': { actions: ['update', 'stamp'] },
        'harness.deleted': { target: 'deleted', actions: 'stamp' },
      },
    },
    deleted: { type: 'final' },
  },
});

export type HarnessSnapshot = SnapshotFrom<typeof harnessMachine>;

export const reject = (snapshot: HarnessSnapshot, event: IncomingEvent): Rejection =>
  snapshot.value === 'active'
    ? { code: 'invalid_state', message: 'The harness already exists.', detail: { state: snapshot.value, type: event.type } }
    : { code: 'not_found', message: 'No such harness.', detail: { state: snapshot.value } };
