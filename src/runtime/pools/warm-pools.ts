/** Builds the warm pools of one started Berth (their metrics on its registry), or nothing when none is configured. */
import type { Logger } from 'pino';
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { BerthRuntime } from '../core/berth-runtime.ts';
import type { Services } from '../services.ts';
import type { PoolSettings } from './pool-config.ts';
import { poolMetrics } from './pool-metrics.ts';
import { PoolService } from './pool-service.ts';

export function warmPools(runtime: BerthRuntime<Services>, services: Services, settings: PoolSettings[] | undefined, logger?: Logger): PoolService | undefined {
  if (!settings?.length) return undefined;
  let pools: PoolService | undefined;
  const observer = poolMetrics(runtime.metrics, () => pools?.status() ?? []);
  pools = new PoolService(
    {
      actors: runtime.actors,
      providers: services.providers,
      active: () => runtime.projections.get('active-allocations')!.query.list() as ActiveAllocation[],
      executorFor: (id) => services.executorFor(id),
      now: services.now,
      observer,
      ...(logger ? { logger } : {}),
    },
    settings,
  );
  return pools;
}
