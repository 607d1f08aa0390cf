/**
 * The storage ownership actor (stream `ownership-<key>`, seed 004 "Workspace turn ownership"): at most one holder
 * (a turn) of a storage `{scope, storageId}`. Acquisition is idempotent for the same holder and refused to another
 * (`workspace_busy`, retryable; the detail names nothing of the holder); release is conditional on the holder; there
 * is no timed takeover. Across runtimes the stream's optimistic concurrency decides who holds: the loser reloads and
 * re-decides (DESIGN §4 rule 8). A cleared holder (admin, with evidence) and a retired storage are final facts.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { OwnershipEvent } from '../../schemas/events/ownership.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface OwnershipContext {
  id: string;
  scope: string;
  workspaceId: string;
  /** The turn holding the storage, and its session. */
  holder: { turnId: string; sessionId: string; since: number } | null;
  updatedAt: number;
}

export const ownershipMachine = setup({
  types: { context: {} as OwnershipContext, events: {} as OwnershipEvent, input: {} as { id: string } },
  actions: {
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    hold: assign(({ event }) =>
      event.type === 'ownership.acquired'
        ? { scope: event.scope, workspaceId: event.workspaceId, holder: { turnId: event.holder, sessionId: event.sessionId, since: event.at } }
        : {},
    ),
    free: assign({ holder: null }),
  },
  guards: {
    isHolder: ({ context, event }) => 'holder' in event && context.holder?.turnId === event.holder,
  },
}).createMachine({
  id: 'ownership',
  context: ({ input }) => ({ id: input.id, scope: '', workspaceId: '', holder: null, updatedAt: 0 }),
  initial: 'free',
  states: {
    free: {
      on: {
        'ownership.acquired': { target: 'held', actions: ['hold', 'stamp'] },
        'ownership.retired': { target: 'retired', actions: 'stamp' },
      },
    },
    held: {
      on: {
        // The same holder again (a retried acquisition, or two of its requests racing): nothing changes.
        'ownership.acquired': { guard: 'isHolder' },
        'ownership.released': { guard: 'isHolder', target: 'free', actions: ['free', 'stamp'] },
        'ownership.cleared': { guard: 'isHolder', target: 'free', actions: ['free', 'stamp'] },
      },
    },
    retired: { type: 'final' },
  },
});

export type OwnershipSnapshot = SnapshotFrom<typeof ownershipMachine>;

/** No effects: nothing to reconcile after a restart (a holder stays held until released or cleared). */
export const finished = (_snapshot: OwnershipSnapshot): boolean => true;

export const reject = (snapshot: OwnershipSnapshot, event: IncomingEvent): Rejection => {
  const detail = { state: snapshot.value };
  if (snapshot.value === 'retired') return { code: 'workspace_unavailable', message: 'The workspace is deleted.', detail: { ...detail, reason: 'deleted' } };
  if (event.type === 'ownership.acquired' || event.type === 'ownership.retired') {
    return { code: 'workspace_busy', message: 'Another turn holds the workspace storage; retry once it is released.', detail: { reason: 'held' } };
  }
  return { code: 'invalid_state', message: 'The turn does not hold the workspace storage.', detail: { ...detail, reason: 'not_holder' } };
};
