/**
 * The gauges `/metrics` reads from the read models when it is scraped: allocations by state, executions by status,
 * paused work by kind, and each read model's lag behind the store's head and whether it failed.
 */
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { BerthRuntime } from './berth-runtime.ts';

export interface GaugeModels {
  /** The active-allocation index. */
  allocations: ReadModel;
  /** Executions' activity (its `byStatus` totals). */
  activity: ReadModel;
  /** Leases (its `pausedByKind` query). */
  leases: ReadModel;
}

/**
 * Counts by a label, set afresh at each scrape (a state that emptied leaves the gauge). A read model that failed
 * answers nothing, so its gauges are left empty (`berth_projection_failed` says why) and the scrape still serves.
 */
function setCounts(gauge: { reset(): void; set(labels: Record<string, string>, n: number): void }, label: string, model: ReadModel, counts: () => Record<string, number>): void {
  gauge.reset();
  if (model.error) return;
  for (const [value, n] of Object.entries(counts())) gauge.set({ [label]: value }, n);
}

export function registerReadModelGauges(runtime: BerthRuntime<any>, models: GaugeModels): void {
  const { metrics } = runtime;
  metrics.gauge({
    name: 'berth_allocations',
    help: 'Allocations in the active-allocation index, by state.',
    labelNames: ['state'],
    collect() {
      setCounts(this, 'state', models.allocations, () => {
        const byState: Record<string, number> = {};
        for (const a of models.allocations.query.list() as ActiveAllocation[]) byState[a.state] = (byState[a.state] ?? 0) + 1;
        return byState;
      });
    },
  });
  metrics.gauge({
    name: 'berth_executions',
    help: 'Executions by status.',
    labelNames: ['status'],
    collect() {
      setCounts(this, 'status', models.activity, () => models.activity.query.byStatus() as Record<string, number>);
    },
  });
  metrics.gauge({
    name: 'berth_leases_paused',
    help: 'Leases paused or held, by work kind.',
    labelNames: ['work_kind'],
    collect() {
      setCounts(this, 'work_kind', models.leases, () => models.leases.query.pausedByKind() as Record<string, number>);
    },
  });
  metrics.gauge({
    name: 'berth_projection_lag_events',
    help: 'Global positions between the store head and each read model.',
    labelNames: ['projection'],
    async collect() {
      for (const [projection, lag] of Object.entries(await runtime.projections.lag())) this.set({ projection }, Number(lag));
    },
  });
  metrics.gauge({
    name: 'berth_projection_failed',
    help: 'Whether each read model failed on an event (1) and answers projection_failed until it is rebuilt.',
    labelNames: ['projection'],
    collect() {
      for (const m of runtime.projections.models) this.set({ projection: m.name }, m.error ? 1 : 0);
    },
  });
}
