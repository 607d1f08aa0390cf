/**
 * The active-allocation index: every allocation not yet released (or failed), with its state, physical identity
 * and retained uses. Recovery reconciles what it lists before work is admitted; maintenance walks it.
 */
import type { ProviderKind } from '../../schemas/profile.ts';
import type { allocationEvents } from '../../schemas/events/allocation.ts';
import { nextUpdatedAt } from '../machines/updated-at.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface ActiveAllocation {
  allocationId: string;
  environmentId: string;
  requestId: string;
  generation: number;
  provider: ProviderKind;
  state: string;
  identity: { resourceId: string; incarnation?: string } | null;
  uses: Record<string, { kind: string; at: number; runtimeId?: string; epoch?: number }>;
  createdAt: number;
  updatedAt: number;
}

const REPORT_STATE: Record<string, string> = { ready: 'ready', pending: 'pending', absent: 'failed', unknown: 'unknown', fenced: 'fenced' };

interface AllocationTables {
  allocations: ActiveAllocation;
}

function reduce(t: Tables<AllocationTables>, e: StoredEvent<typeof allocationEvents>): void {
  const id = e.stream.slice('allocation-'.length);
  if (e.type === 'allocation.intended') {
    const d = e.data;
    t.allocations.put(id, {
      allocationId: id,
      environmentId: d.environmentId,
      requestId: d.requestId,
      generation: d.generation,
      provider: d.profile.provider,
      state: 'requested',
      identity: null,
      uses: {},
      createdAt: d.at,
      updatedAt: d.at,
    });
    return;
  }
  const a = t.allocations.get(id);
  if (!a) return;
  if (typeof e.data.at === 'number') a.updatedAt = nextUpdatedAt(a.updatedAt, e.data.at);
  switch (e.type) {
    case 'allocation.reported': {
      const d = e.data;
      const next = REPORT_STATE[d.report.status];
      // A ready allocation found absent is lost; other reports while ready only confirm it.
      if (a.state === 'ready') {
        if (d.report.status === 'absent') a.state = 'lost';
        else if (d.report.status === 'fenced') a.state = 'fenced';
      } else if (next) a.state = next;
      const identity = 'identity' in d.report ? d.report.identity : undefined;
      if (identity) a.identity = { resourceId: identity.resourceId, incarnation: identity.incarnation };
      break;
    }
    case 'allocation.use_acquired': {
      const d = e.data;
      if (a.state === 'ready' && !a.uses[d.useId]) a.uses[d.useId] = { kind: d.kind, at: d.at, runtimeId: d.runtimeId, epoch: d.epoch };
      break;
    }
    case 'allocation.use_released':
      delete a.uses[e.data.useId];
      break;
    case 'allocation.claimed':
      // A warm pool's allocation now belongs to an environment (its guard held: ready, unused).
      if (a.state === 'ready') Object.assign(a, { environmentId: e.data.environmentId, generation: e.data.generation });
      break;
    case 'allocation.resume_requested':
      a.state = 'requested';
      break;
    case 'allocation.release_requested':
      a.state = 'releasing';
      break;
    case 'allocation.deallocated':
      if (e.data.result === 'terminated') a.state = 'released';
      break;
    case 'runtime.recovered': {
      const d = e.data;
      for (const [useId, u] of Object.entries(a.uses)) {
        if (u.kind === 'admission' && u.runtimeId === d.runtimeId && (u.epoch ?? 0) < d.epoch) delete a.uses[useId];
      }
      break;
    }
  }
  if (a.state === 'released' || a.state === 'failed') t.allocations.delete(id);
  else t.allocations.put(id, a);
}

export const activeAllocationsProjection = defineProjection({
  name: 'active-allocations',
  version: 3,
  filter: { streamPrefixes: ['allocation-'] },
  // Rows leave when their allocation is released: the table holds the allocations alive, never the history.
  tables: { allocations: table<ActiveAllocation>({ columns: ['environmentId'], indexes: [['environmentId']] }) },
  reduce,
  queries: {
    /** Every allocation alive: for maintenance and metrics (the table holds work in flight, not the history). */
    list: (t): ActiveAllocation[] => t.allocations.all(),
    /** One page of the allocations alive (of one environment when named), in creation order, from after the cursor. */
    page: (t, environmentId: string | undefined, range: Omit<PageRequest<ActiveAllocation>, 'where'>): Page<ActiveAllocation> =>
      t.allocations.page({ ...range, where: { environmentId } }),
    get: (t, id: string): ActiveAllocation | undefined => t.allocations.get(id),
    /** Uses retained by allocations, for the Environment API's "retained uses". */
    retainedUses: (t) =>
      t.allocations.all().flatMap((a) => Object.entries(a.uses).map(([useId, u]) => ({ allocationId: a.allocationId, useId, ...u }))),
  },
});
