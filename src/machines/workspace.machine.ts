/**
 * The workspace actor (stream `workspace-<id>`, issue 13, DESIGN §10): a storage identity `{scope, storageId}`
 * with a binding generation, and its file history. A directory root found replaced at a start moves the generation
 * on (sessions bound to the old one are refused). A deleted managed workspace has its directory removed by an
 * effect whose outcome (`workspace.removed`) ends the actor; recovery runs the removal again (it is idempotent).
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { WorkspaceEvent } from '../../schemas/events/workspace.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export interface WorkspaceContext {
  id: string;
  scope: string;
  kind: 'directory' | 'managed';
  storageId: string;
  name: string | null;
  generation: number;
  identity: string;
  /** The head: every recorded change (a tool's, a shell command's, a published checkpoint) moves it by one. */
  revision: number;
  /** The latest published checkpoint and the revision it made. */
  checkpoint: { id: string; revision: number } | null;
  /** Recently published attempts, the revision and tree each made: a retried publication is answered, not repeated. */
  published: Record<string, { revision: number; checkpointId: string }>;
  createdAt: number;
  updatedAt: number;
}

export interface RemoveDirectoryParams {
  workspaceId: string;
  kind: 'directory' | 'managed';
}

const removeDirectory = {
  type: 'workspace.remove_directory',
  params: ({ context }: { context: WorkspaceContext }): RemoveDirectoryParams => ({ workspaceId: context.id, kind: context.kind }),
} as const;

/** Published attempts remembered for answering retried publications. */
const PUBLISHED_KEPT = 64;

export const workspaceMachine = setup({
  types: { context: {} as WorkspaceContext, events: {} as WorkspaceEvent, input: {} as { id: string } },
  actions: {
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    create: assign(({ event }) =>
      event.type === 'workspace.created'
        ? { scope: event.scope, kind: event.kind, storageId: event.storageId, name: event.name ?? null, identity: event.identity, generation: 1, createdAt: event.at }
        : {},
    ),
    rebind: assign(({ context, event }) => (event.type === 'workspace.rebound' ? { identity: event.identity, generation: context.generation + 1 } : {})),
    'workspace.remove_directory': effect<RemoveDirectoryParams>(),
    advance: assign({ revision: ({ context }) => context.revision + 1 }),
    publish: assign(({ context, event }) => {
      if (event.type !== 'workspace.checkpoint_published') return {};
      const revision = context.revision + 1;
      const kept = Object.entries(context.published).slice(-(PUBLISHED_KEPT - 1));
      return { revision, checkpoint: { id: event.checkpointId, revision }, published: { ...Object.fromEntries(kept), [event.attemptId]: { revision, checkpointId: event.checkpointId } } };
    }),
  },
  guards: {
    /** A mounted command's changes: its checkpoint moved the head already (this event only records what changed). */
    carriedByCheckpoint: ({ event }) => event.type === 'workspace.files_changed' && event.tool === 'shell' && event.checkpointId !== undefined,
    onHead: ({ context, event }) =>
      event.type === 'workspace.checkpoint_published' && event.baseRevision === context.revision && !(event.attemptId in context.published),
    newIdentity: ({ context, event }) => event.type === 'workspace.rebound' && event.identity !== context.identity,
  },
}).createMachine({
  id: 'workspace',
  context: ({ input }) => ({
    id: input.id,
    scope: '',
    kind: 'managed',
    storageId: '',
    name: null,
    generation: 0,
    identity: '',
    revision: 0,
    checkpoint: null,
    published: {},
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: { on: { 'workspace.created': { target: 'active', actions: ['create', 'stamp'] } } },
    active: {
      on: {
        'workspace.rebound': { guard: 'newIdentity', actions: ['rebind', 'stamp'] },
        'workspace.files_changed': [
          { guard: 'carriedByCheckpoint', actions: 'stamp' },
          { actions: ['advance', 'stamp'] },
        ],
        'workspace.checkpoint_published': { guard: 'onHead', actions: ['publish', 'stamp'] },
        'workspace.deleted': { target: 'deleted', actions: ['stamp', removeDirectory] },
      },
    },
    deleted: {
      on: {
        // A shell command's changes may be recorded by its turn's release after the delete was decided: kept.
        'workspace.files_changed': { actions: 'stamp' },
        'workspace.removed': { target: 'removed', actions: 'stamp' },
        'runtime.recovered': { actions: removeDirectory },
      },
    },
    removed: { type: 'final' },
  },
});

export type WorkspaceSnapshot = SnapshotFrom<typeof workspaceMachine>;

export const reject = (snapshot: WorkspaceSnapshot, event: IncomingEvent): Rejection => {
  const detail = { state: snapshot.value, type: event.type };
  if (snapshot.value === 'pristine') return { code: 'not_found', message: 'No such workspace.', detail };
  if (event.type === 'workspace.created') return { code: 'invalid_state', message: 'The workspace already exists.', detail: { ...detail, reason: 'exists' } };
  if (event.type === 'workspace.checkpoint_published' && snapshot.value === 'active') {
    const attemptId = String(event.attemptId);
    if (attemptId in snapshot.context.published) {
      return { code: 'invalid_state', message: 'The attempt is published already.', detail: { ...detail, reason: 'already_published', ...snapshot.context.published[attemptId] } };
    }
    return { code: 'stale_version', message: 'The head moved past the revision the checkpoint builds on: nothing was published.', detail: { ...detail, reason: 'stale_checkpoint', head: snapshot.context.revision, base: event.baseRevision } };
  }
  if (event.type === 'workspace.rebound') return { code: 'invalid_state', message: 'The workspace already has that root.', detail: { ...detail, reason: 'unchanged' } };
  return { code: 'workspace_unavailable', message: 'The workspace is deleted.', detail: { ...detail, reason: 'deleted' } };
};
