/**
 * Prometheus text for `/metrics`: allocations by state, executions by status, paused work by kind and lease resumes,
 * append latency, projection lag.
 */
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { BerthRuntime } from './berth-runtime.ts';
import type { TimedEventStore } from './timed-event-store.ts';

const line = (name: string, labels: Record<string, string>, value: number | bigint) =>
  `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
    .join(',')}} ${value}`;

export interface LeaseMetrics {
  /** The leases read model (its `pausedByKind` query). */
  model: ReadModel;
  /** Resumes by whether the machine was reused, recreated, or the resume failed. */
  resumes: Record<'reused' | 'recreated' | 'failed', number>;
}

export async function metricsText(runtime: BerthRuntime<any>, active: ReadModel, activity: ReadModel, leases: LeaseMetrics): Promise<string> {
  const out: string[] = [];
  out.push('# HELP berth_allocations Allocations in the active-allocation index, by state.', '# TYPE berth_allocations gauge');
  const byState: Record<string, number> = {};
  for (const a of active.query.list() as ActiveAllocation[]) byState[a.state] = (byState[a.state] ?? 0) + 1;
  for (const [state, n] of Object.entries(byState)) out.push(line('berth_allocations', { state }, n));
  out.push('# HELP berth_executions Executions by status.', '# TYPE berth_executions gauge');
  for (const [status, n] of Object.entries(activity.query.byStatus() as Record<string, number>)) {
    out.push(line('berth_executions', { status }, n));
  }
  out.push('# HELP berth_leases_paused Leases paused or held, by work kind.', '# TYPE berth_leases_paused gauge');
  for (const [kind, n] of Object.entries(leases.model.query.pausedByKind() as Record<string, number>)) out.push(line('berth_leases_paused', { work_kind: kind }, n));
  out.push('# HELP berth_lease_resumes_total Resumes of paused leases at acquire, by machine reused, recreated, or failed.', '# TYPE berth_lease_resumes_total counter');
  for (const [machine, n] of Object.entries(leases.resumes)) out.push(line('berth_lease_resumes_total', { machine }, n));
  const timed = runtime.store as Partial<TimedEventStore>;
  if (timed.appendLatency) {
    const h = timed.appendLatency;
    out.push('# HELP berth_event_store_append_seconds Event store append latency.', '# TYPE berth_event_store_append_seconds histogram');
    let cumulative = 0;
    h.buckets.forEach((le, i) => {
      cumulative += h.counts[i];
      out.push(line('berth_event_store_append_seconds_bucket', { le: String(le) }, cumulative));
    });
    out.push(line('berth_event_store_append_seconds_bucket', { le: '+Inf' }, h.count));
    out.push(`berth_event_store_append_seconds_sum ${h.sum}`, `berth_event_store_append_seconds_count ${h.count}`);
  }
  const head = await runtime.store.headPosition();
  out.push('# HELP berth_projection_lag_events Global positions between the store head and each read model.', '# TYPE berth_projection_lag_events gauge');
  for (const m of runtime.projections.models) {
    const lag = head > m.position ? head - m.position : 0n;
    out.push(line('berth_projection_lag_events', { projection: m.name }, lag));
  }
  return `${out.join('\n')}\n`;
}
