/**
 * The leases read model (issue 15): every lease not released, with its scope, its work and whether it is paused, so a
 * work's leases are listed and the maintenance loop finds paused ones (timers, idle reclamation) without a scan.
 */
import type { leaseEvents } from '../../schemas/events/lease.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface LeaseEntry {
  id: string;
  scope: string;
  key: string;
  workKind: string;
  workId: string;
  state: 'running' | 'paused' | 'held' | 'releasing';
  pausedAt: number | null;
  retryAt: number | null;
  idleSeconds: number;
  /** When its deadline releases it (ms since the epoch), or null; `timed` indexes the leases that have one. */
  deadline: number | null;
  timed: boolean;
  /** Whether it has a machine now (not reclaimed). */
  machine: boolean;
  createdAt: number;
}

interface LeaseTables {
  leases: LeaseEntry;
}

function reduce(t: Tables<LeaseTables>, e: StoredEvent<typeof leaseEvents>): void {
  const id = e.stream.slice('lease-'.length);
  const row = t.leases.get(id);
  const put = (patch: Partial<LeaseEntry>) => row && t.leases.put(id, { ...row, ...patch });
  switch (e.type) {
    case 'lease.bound': {
      const d = e.data;
      t.leases.put(id, { id, scope: d.scope, key: d.key, workKind: d.work.kind, workId: d.work.id, state: 'running', pausedAt: null, retryAt: null, idleSeconds: d.idleSeconds, deadline: null, timed: false, machine: false, createdAt: d.at });
      return;
    }
    case 'lease.acquired':
      return void put({ machine: true });
    case 'lease.reclaimed':
      return void put({ machine: false });
    case 'lease.paused':
      return void put({ state: 'paused', pausedAt: row?.state === 'paused' ? row.pausedAt : e.data.at, retryAt: e.data.retryAt ?? null });
    case 'lease.held':
      return void put({ state: 'held', pausedAt: row?.pausedAt ?? e.data.at, retryAt: null });
    case 'lease.resumed':
      return void put({ state: 'running', pausedAt: null, retryAt: null });
    case 'lease.deadline_set':
      return void put({ deadline: e.data.deadline, timed: e.data.deadline !== null });
    case 'lease.release_requested':
      return void put({ state: 'releasing' });
    case 'lease.released':
      return void t.leases.delete(id);
    default:
      return;
  }
}

export const leasesProjection = defineProjection({
  name: 'leases',
  version: 2,
  filter: { streamPrefixes: ['lease-'] },
  tables: { leases: table<LeaseEntry>({ columns: ['scope', 'workKind', 'workId', 'state', 'timed'], indexes: [['scope'], ['scope', 'workKind', 'workId'], ['state'], ['timed']] }) },
  reduce,
  queries: {
    /** One page of `scope`'s leases (every scope's when undefined), optionally of one work, in binding order. */
    page: (t, scope: string | undefined, work: { kind?: string; id?: string }, range: Omit<PageRequest<LeaseEntry>, 'where'>): Page<LeaseEntry> =>
      t.leases.page({ ...range, where: { scope, ...(work.kind ? { workKind: work.kind } : {}), ...(work.id ? { workId: work.id } : {}) } }),
    /** How many leases `scope` has bound and not released (its members' quota). */
    count: (t, scope: string): number => t.leases.count({ scope }),
    /** Leases paused or held (their timers and idle reclamation), and those releasing (to finish). */
    waiting: (t): LeaseEntry[] => t.leases.all({ state: ['paused', 'held', 'releasing'] }),
    /** Leases whose deadline is due at `now` and not releasing yet (the maintenance loop releases them). */
    due: (t, now: number): LeaseEntry[] => t.leases.all({ timed: true }).filter((l) => l.state !== 'releasing' && l.deadline !== null && l.deadline <= now),
    /** Paused work by kind (seed 003 trackWorkPaused), for the metrics. */
    pausedByKind: (t): Record<string, number> => {
      const counts: Record<string, number> = {};
      for (const l of t.leases.all({ state: ['paused', 'held'] })) counts[l.workKind] = (counts[l.workKind] ?? 0) + 1;
      return counts;
    },
  },
});
