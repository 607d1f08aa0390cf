/**
 * The activity view: every execution with its status, lifecycle step and structured failure, never payloads (no
 * command, no output, no environment values). Unfinished operations are those whose lifecycle has not reached
 * `released`: what recovery and maintenance still own, listed with `unfinished: true`.
 */
import type { executionEvents } from '../../schemas/events/execution.ts';
import type { ExecutionStatus } from '../../schemas/states.ts';
import { outputExceededFailure } from '../machines/execution.machine.ts';
import { defineProjection, type StoredEvent } from './projection.ts';

export interface ActivityEntry {
  id: string;
  kind: 'execution';
  operationId: string;
  environmentId: string;
  allocationId: string;
  scope: string;
  status: ExecutionStatus;
  /** The execution machine's state (accepted … released, closing): what remains to reconcile. */
  step: string;
  exitCode: number | null;
  signal: string | null;
  failure: { code: string; message: string } | null;
  /** Bytes of output once drained (every stream): what its saved output keeps on disk. Null before. */
  outputBytes: number | null;
  createdAt: number;
  updatedAt: number;
}

export type ActivityItem = ActivityEntry & { unfinished: boolean };

/** The machine state each event enters (cancellation requests and recovery notices leave it where it is). */
const STEP_OF: Record<string, string> = {
  'execution.dispatched': 'dispatched',
  'execution.started': 'running',
  'execution.exited': 'exited',
  'execution.drained': 'drained',
  'execution.saved': 'saved',
  'execution.released': 'released',
  'execution.failed': 'closing',
  'execution.unknown': 'closing',
};

function reduce(state: Map<string, ActivityEntry>, e: StoredEvent<typeof executionEvents>): Map<string, ActivityEntry> {
  const id = e.stream.slice('execution-'.length);
  if (e.type === 'execution.accepted') {
    const d = e.data;
    state.set(id, {
      id,
      kind: 'execution',
      operationId: d.operationId,
      environmentId: d.environmentId,
      allocationId: d.target.allocationId,
      scope: d.scope,
      status: 'accepted',
      step: 'accepted',
      exitCode: null,
      signal: null,
      failure: null,
      outputBytes: null,
      createdAt: d.at,
      updatedAt: d.at,
    });
    return state;
  }
  const x = state.get(id);
  if (!x) return state;
  if (e.type === 'runtime.recovered') return state;
  if (typeof e.data.at === 'number') x.updatedAt = Math.max(x.updatedAt + 1, e.data.at);
  x.step = STEP_OF[e.type] ?? x.step;
  switch (e.type) {
    case 'execution.started':
      x.status = 'running';
      break;
    case 'execution.exited':
      x.status = e.data.cancelled ? 'cancelled' : 'exited';
      x.exitCode = e.data.exitCode;
      x.signal = e.data.signal;
      break;
    case 'execution.cancel_requested':
      // Before dispatch nothing was sent: the cancel completes at once (the machine closes).
      if (x.step === 'accepted') {
        x.status = 'cancelled';
        x.step = 'closing';
      }
      break;
    case 'execution.drained':
      x.outputBytes = Object.values(e.data.sizes).reduce((sum, n) => sum + (n ?? 0), 0);
      break;
    case 'execution.output_exceeded':
      x.failure = outputExceededFailure(e.data);
      break;
    case 'execution.failed':
      x.status = 'failed';
      x.failure = { code: e.data.code, message: e.data.message };
      break;
    case 'execution.unknown':
      x.status = 'unknown';
      x.failure = { code: 'unknown', message: e.data.reason };
      break;
  }
  return state;
}

const item = (x: ActivityEntry): ActivityItem => ({ ...x, unfinished: x.step !== 'released' });

export const activityProjection = defineProjection({
  name: 'activity',
  version: 3,
  filter: { streamPrefixes: ['execution-'] },
  init: () => new Map<string, ActivityEntry>(),
  reduce,
  queries: {
    /** Every execution of `scope` (all scopes when undefined), oldest first. */
    list: (s: Map<string, ActivityEntry>, scope?: string): ActivityItem[] =>
      [...s.values()].filter((x) => scope === undefined || x.scope === scope).map(item),
    get: (s: Map<string, ActivityEntry>, id: string): ActivityEntry | undefined => s.get(id),
    /** Operations whose lifecycle is not finished (released): what recovery and maintenance still own. */
    unfinished: (s: Map<string, ActivityEntry>, scope?: string): ActivityItem[] =>
      [...s.values()].filter((x) => x.step !== 'released' && (scope === undefined || x.scope === scope)).map(item),
    byStatus: (s: Map<string, ActivityEntry>) => {
      const counts: Record<string, number> = {};
      for (const x of s.values()) counts[x.status] = (counts[x.status] ?? 0) + 1;
      return counts;
    },
  },
});
