/**
 * The activity view: every execution with its status, lifecycle step and structured failure. Its rows also keep what
 * an execution record shows (command, target, version), so a listing page is one index range read; the activity
 * listing itself never shows payloads (no command, no output, no environment values). Unfinished operations are
 * those whose lifecycle has not reached `released`: what recovery and maintenance still own. Per-status and per-scope
 * totals are kept beside, so quotas and metrics never count the history.
 */
import type { executionEvents, Target } from '../../schemas/events/execution.ts';
import { executionStatusSchema, terminalStatuses, type ExecutionStatus } from '../../schemas/states.ts';
import { outputExceededFailure } from '../machines/execution.machine.ts';
import { nextUpdatedAt } from '../machines/updated-at.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface ActivityEntry {
  id: string;
  kind: 'execution';
  operationId: string;
  environmentId: string;
  allocationId: string;
  scope: string;
  status: ExecutionStatus;
  /** The execution machine's state (accepted … released, closing, compacted): what remains to reconcile. */
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

/** An execution's row: its activity entry and the rest of its record. */
export interface ExecutionRow extends ActivityItem {
  target: Target;
  command: string[];
  version?: number;
  /** Set once it exited (an exit code or a signal). */
  exited: boolean;
  /** Its timeout ended it (it was killed when timeoutMs passed). */
  timedOut?: boolean;
}

interface StatusCount {
  status: ExecutionStatus;
  n: number;
}

interface ScopeTotal {
  scope: string;
  /** Drained output bytes its executions keep on disk. */
  outputBytes: number;
}

interface ActivityTables {
  executions: ExecutionRow;
  statuses: StatusCount;
  scopes: ScopeTotal;
}

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
  'execution.compacted': 'compacted',
};

type ExecutionStoredEvent = StoredEvent<typeof executionEvents>;

/** Statuses that still count against a scope's concurrency: every one that is not terminal. */
const LIVE_STATUSES = executionStatusSchema.options.filter((s) => !terminalStatuses.has(s));

function reduce(t: Tables<ActivityTables>, e: ExecutionStoredEvent): void {
  const id = e.stream.slice('execution-'.length);
  if (e.type === 'execution.accepted' || (e.type === 'execution.compacted' && !t.executions.get(id))) {
    const row = created(id, e);
    t.executions.put(id, row);
    count(t, row.status, 1);
    return;
  }
  const x = t.executions.get(id);
  if (!x || e.type === 'runtime.recovered') return;
  const was = x.status;
  x.updatedAt = nextUpdatedAt(x.updatedAt, e.data.at);
  x.step = STEP_OF[e.type] ?? x.step;
  switch (e.type) {
    case 'execution.started':
      x.status = 'running';
      break;
    case 'execution.exited':
      x.status = e.data.cancelled ? 'cancelled' : 'exited';
      x.exitCode = e.data.exitCode;
      x.signal = e.data.signal;
      x.exited = true;
      if (e.data.timedOut) x.timedOut = true;
      break;
    case 'execution.cancel_requested':
      if (e.data.failure && !x.failure) x.failure = e.data.failure;
      // Before dispatch nothing was sent: the cancel completes at once (the machine closes).
      if (x.step === 'accepted') {
        x.status = 'cancelled';
        x.step = 'closing';
      }
      break;
    case 'execution.drained':
      x.outputBytes = Object.values(e.data.sizes).reduce((sum, n) => sum + (n ?? 0), 0);
      addBytes(t, x.scope, x.outputBytes);
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
    case 'execution.compacted':
      // Its output left this host (removed or archived): the scope keeps those bytes no longer.
      addBytes(t, x.scope, -(x.outputBytes ?? 0));
      break;
  }
  x.unfinished = x.step !== 'released' && x.step !== 'compacted';
  t.executions.put(id, x);
  if (x.status !== was) {
    count(t, was, -1);
    count(t, x.status, 1);
  }
}

/** The row an execution's first event starts: its acceptance, or the tombstone of a compacted stream. */
function created(id: string, e: Extract<ExecutionStoredEvent, { type: 'execution.accepted' | 'execution.compacted' }>): ExecutionRow {
  const d = e.data;
  const common = {
    id,
    kind: 'execution' as const,
    operationId: d.operationId,
    environmentId: d.environmentId,
    allocationId: d.target.allocationId,
    scope: d.scope,
    target: d.target,
    command: d.command,
    ...(d.version !== undefined ? { version: d.version } : {}),
  };
  if (e.type === 'execution.accepted') {
    return { ...common, status: 'accepted', step: 'accepted', exitCode: null, signal: null, failure: null, outputBytes: null, exited: false, unfinished: true, createdAt: d.at, updatedAt: d.at };
  }
  const c = e.data;
  return {
    ...common,
    status: c.status,
    step: 'compacted',
    exitCode: c.exitCode,
    signal: c.signal,
    failure: c.failure,
    outputBytes: c.outputBytes,
    exited: c.exitCode !== null || c.signal !== null,
    unfinished: false,
    createdAt: c.createdAt,
    updatedAt: c.at,
  };
}

function count(t: Tables<ActivityTables>, status: ExecutionStatus, by: number): void {
  const c = t.statuses.get(status) ?? { status, n: 0 };
  c.n += by;
  t.statuses.put(status, c);
}

function addBytes(t: Tables<ActivityTables>, scope: string, bytes: number): void {
  const s = t.scopes.get(scope) ?? { scope, outputBytes: 0 };
  s.outputBytes += bytes;
  t.scopes.put(scope, s);
}

/** The activity item of a row: no payloads. */
export const activityItem = ({ target: _t, command: _c, version: _v, exited: _e, ...item }: ExecutionRow): ActivityItem => item;

export interface ExecutionFilter {
  /** Undefined: every scope. */
  scope?: string;
  environmentId?: string;
  status?: ExecutionStatus;
}

export const activityProjection = defineProjection({
  name: 'activity',
  version: 4,
  filter: { streamPrefixes: ['execution-'] },
  tables: {
    executions: table<ExecutionRow>({
      columns: ['scope', 'environmentId', 'status', 'step', 'unfinished'],
      indexes: [['scope'], ['scope', 'status'], ['scope', 'environmentId'], ['environmentId'], ['status'], ['unfinished'], ['step']],
    }),
    statuses: table<StatusCount>(),
    scopes: table<ScopeTotal>(),
  },
  reduce,
  queries: {
    /** One page of executions matching `filter`, oldest first (or newest first), from after the cursor. */
    page: (t, filter: ExecutionFilter, range: Omit<PageRequest<ExecutionRow>, 'where'>): Page<ExecutionRow> =>
      t.executions.page({ ...range, where: filter }),
    get: (t, id: string): ExecutionRow | undefined => t.executions.get(id),
    /** Operations whose lifecycle is not finished (released): what recovery and maintenance still own. */
    unfinished: (t, scope?: string): ExecutionRow[] => t.executions.all({ unfinished: true, scope }),
    /** Every scope's executions not yet terminal (accepted or running). */
    liveAll: (t): ExecutionRow[] => t.executions.all({ status: LIVE_STATUSES }),
    /** Executions of `scope` not yet terminal (accepted or running): what its concurrency quota counts. */
    live: (t, scope: string): number => t.executions.count({ scope, status: LIVE_STATUSES }),
    /** Drained output bytes the scope's executions keep on disk. */
    outputBytes: (t, scope: string): number => t.scopes.get(scope)?.outputBytes ?? 0,
    byStatus: (t): Record<string, number> => Object.fromEntries(t.statuses.all().map((c) => [c.status, c.n])),
    /**
     * Released executions last updated before `cutoff` (ms), oldest first, at most `limit`: what retention may
     * compact. Rows are in creation order, so the walk stops at the first one created after the cutoff.
     */
    finishedBefore: (t, cutoff: number, limit: number): ExecutionRow[] => {
      const found: ExecutionRow[] = [];
      let after: number | undefined;
      for (;;) {
        const page = t.executions.page({ where: { step: 'released' }, after, limit: 500 });
        for (const x of page.rows) {
          if (x.createdAt >= cutoff) return found;
          if (x.updatedAt < cutoff && found.push(x) >= limit) return found;
        }
        if (page.next === undefined) return found;
        after = page.next;
      }
    },
  },
});
