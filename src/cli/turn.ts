/**
 * `berth turn open|show|release|checkpoint|restore`: tool turns of a session on a running server. An open turn holds
 * the session's workspace storage (no other turn runs on it) until it is released; commands run in it with
 * `berth exec --session S --turn T`, files move in and out with `berth cp --turn T`; in it the workspace is
 * checkpointed, or given back the tree of one of its checkpoints.
 */
import { BerthError } from '../../schemas/errors.ts';
import { isBerthApiError } from '../client/berth-api-error.ts';
import type { Turn } from '../client/berth-client.ts';
import { UsageError } from './command-args.ts';
import { milliseconds, subcommands } from './subcommands.ts';
import { turnUsage } from './usage.ts';


/** Opening a turn on a workspace another turn holds: the server's refusal, with what to do about it. */
export async function busyExplained<T>(opening: Promise<T>): Promise<T> {
  try {
    return await opening;
  } catch (error) {
    if (!isBerthApiError(error, 'workspace_busy')) throw error;
    throw new BerthError('workspace_busy', `The workspace is busy: ${error.message} (--wait MS waits for it).`, error.detail);
  }
}

const describe = (t: Turn) =>
  `${t.id}  ${t.state}${t.cleared ? ' (cleared by an admin)' : ''}  session ${t.sessionId}  workspace ${t.workspaceId}  ${t.executions.length} command(s)`;

/** --expect-revision: a non-negative integer. */
function revision(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d{1,15}$/.test(value) || !Number.isSafeInteger(n)) throw new UsageError('--expect-revision takes a revision (a non-negative integer)', turnUsage);
  return n;
}

export const turnCommand = subcommands(turnUsage, { key: { type: 'string' }, wait: { type: 'string' }, 'expect-revision': { type: 'string' } } as const, {
  open: {
    args: ['SESSION'],
    flags: ['key', 'wait'],
    run: async (berth, [session], values, print) => {
      const waitMs = milliseconds(values.wait, 'wait', turnUsage);
      const turn = await busyExplained(berth.turns.open(session!, { ...(values.key !== undefined ? { key: values.key } : {}), ...(waitMs !== undefined ? { waitMs } : {}) }));
      await print(turn, turn.id);
    },
  },
  show: {
    args: ['SESSION', 'TURN'],
    run: async (berth, [session, turn], _, print) => {
      const found = await berth.turns.get(session!, turn!);
      await print(found, describe(found));
    },
  },
  release: {
    args: ['SESSION', 'TURN'],
    flags: ['wait'],
    run: async (berth, [session, turn], values, print) => {
      const waitMs = milliseconds(values.wait, 'wait', turnUsage);
      const released = await berth.turns.release(session!, turn!, waitMs !== undefined ? { waitMs } : {});
      await print(released, describe(released));
    },
  },
  checkpoint: {
    args: ['SESSION', 'TURN'],
    run: async (berth, [session, turn], _, print) => {
      const checkpoint = await berth.turns.checkpoint(session!, turn!);
      await print(checkpoint, checkpoint.id);
    },
  },
  restore: {
    args: ['SESSION', 'TURN', 'CHECKPOINT'],
    flags: ['expect-revision'],
    run: async (berth, [session, turn, checkpoint], values, print) => {
      const expectedRevision = revision(values['expect-revision']);
      const restored = await berth.turns.restore(session!, turn!, checkpoint!, expectedRevision !== undefined ? { expectedRevision } : {});
      await print(restored, `restored ${restored.checkpointId}: ${restored.changes.length} change(s)`);
    },
  },
});
