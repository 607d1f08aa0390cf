/**
 * The warm pools' Prometheus families on the Berth's registry: size and ready count per pool (read when scraped),
 * claims by result and failed refills; a hit's latency is a warm allocate (berth_allocate_seconds{start="warm"}).
 */
import { observeWarmClaim } from '../core/duration-spans.ts';
import type { BerthMetrics } from '../core/metrics-registry.ts';
import type { PoolObserver, PoolStatus } from './pool-stats.ts';

export function poolMetrics(metrics: BerthMetrics, status: () => PoolStatus[]): PoolObserver {
  metrics.gauge({
    name: 'berth_pool_size',
    help: 'Allocations each warm pool keeps made ahead of need (its configured size).',
    labelNames: ['pool'],
    collect() {
      for (const p of status()) this.set({ pool: p.name }, p.size);
    },
  });
  metrics.gauge({
    name: 'berth_pool_ready',
    help: 'Pooled allocations ready to claim now (their supervisor answered).',
    labelNames: ['pool'],
    collect() {
      for (const p of status()) this.set({ pool: p.name }, p.ready);
    },
  });
  const claims = metrics.counter({ name: 'berth_pool_claims_total', help: 'Acquires a warm pool fits, by result: hit (claimed a ready allocation), miss (none ready: went cold) or fallback (the one taken could not show the content version: went cold).', labelNames: ['pool', 'result'] });
  const failures = metrics.counter({ name: 'berth_pool_refill_failures_total', help: 'Pooled allocations that could not be made or did not answer their probe.', labelNames: ['pool'] });
  return {
    claimed(pool, result, seconds) {
      claims.inc({ pool, result });
      if (seconds !== undefined) observeWarmClaim(metrics, seconds);
    },
    refillFailed(pool) {
      failures.inc({ pool });
    },
  };
}
