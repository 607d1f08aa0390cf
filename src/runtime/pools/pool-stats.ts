/**
 * What an admin sees of a warm pool (GET /v1/pools), and how its claims and refills are reported to /metrics
 * (pool-metrics.ts): a hit took a ready allocation, a miss found none and the acquire went cold, a fallback took one
 * that could not show the environment's content version (it stayed pooled) and the acquire went cold.
 */
import type { Profile } from '../../../schemas/profile.ts';

export type ClaimResult = 'hit' | 'miss' | 'fallback';

export interface PoolStatus {
  name: string;
  profile: Profile;
  size: number;
  maxAgeSeconds?: number;
  /** Ready to claim now. */
  ready: number;
  /** Being made or probed. */
  starting: number;
  /** Being released (aged, drained, found gone or failed their probe). */
  retiring: number;
  consecutiveFailures: number;
  lastError: string | null;
  lastErrorAt: number | null;
  nextAttemptAt: number | null;
  attemptsLastMinute: number;
  claims: Record<ClaimResult, number>;
}

/** Told of each claim and each failed refill (pool-metrics.ts turns them into Prometheus families). */
export interface PoolObserver {
  claimed(pool: string, result: ClaimResult, seconds?: number): void;
  refillFailed(pool: string): void;
}
