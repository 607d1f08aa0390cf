/**
 * The activity view: every execution with its status and structured failure, never payloads (no command output,
 * no environment values). Unfinished operations are the ones whose status is not terminal.
 */
import type { RecordedEvent } from '../store/event-store.ts';
import { defineProjection } from './projection.ts';

export interface ActivityEntry {
  id: string;
  kind: 'execution';
  operationId: string;
  environmentId: string;
  allocationId: string;
  scope: string;
  status: 'accepted' | 'running' | 'exited' | 'cancelled' | 'failed' | 'unknown';
  /** Lifecycle step (accepted … released): what remains to reconcile. */
  step: string;
  exitCode: number | null;
  failure: { code: string; message: string } | null;
  createdAt: number;
  updatedAt: number;
}

type Data = Record<string, any>;


function reduce(state: Map<string, ActivityEntry>, e: RecordedEvent): Map<string, ActivityEntry> {
  const id = e.stream.slice('execution-'.length);
  const d = e.data as Data;
  if (e.type === 'execution.accepted') {
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
      failure: null,
      createdAt: d.at,
      updatedAt: d.at,
    });
    return state;
  }
  const x = state.get(id);
  if (!x) return state;
  if (typeof d.at === 'number') x.updatedAt = Math.max(x.updatedAt + 1, d.at);
  const step = e.type.slice('execution.'.length);
  if (e.type !== 'runtime.recovered' && !step.startsWith('cancel')) x.step = step;
  switch (e.type) {
    case 'execution.started':
      x.status = 'running';
      break;
    case 'execution.exited':
      x.status = d.cancelled ? 'cancelled' : 'exited';
      x.exitCode = d.exitCode;
      break;
    case 'execution.cancel_requested':
      if (x.step === 'accepted') x.status = 'cancelled';
      break;
    case 'execution.failed':
      x.status = 'failed';
      x.failure = { code: d.code, message: d.message };
      break;
    case 'execution.unknown':
      x.status = 'unknown';
      x.failure = { code: 'unknown', message: d.reason };
      break;
  }
  return state;
}

export const activityProjection = defineProjection({
  name: 'activity',
  version: 1,
  filter: { streamPrefixes: ['execution-'] },
  init: () => new Map<string, ActivityEntry>(),
  reduce,
  queries: {
    list: (s: Map<string, ActivityEntry>, scope?: string) =>
      [...s.values()].filter((x) => scope === undefined || x.scope === scope),
    /** Operations whose lifecycle is not finished (released): what recovery and maintenance still own. */
    unfinished: (s: Map<string, ActivityEntry>) => [...s.values()].filter((x) => x.step !== 'released'),
    byStatus: (s: Map<string, ActivityEntry>) => {
      const counts: Record<string, number> = {};
      for (const x of s.values()) counts[x.status] = (counts[x.status] ?? 0) + 1;
      return counts;
    },
  },
});
