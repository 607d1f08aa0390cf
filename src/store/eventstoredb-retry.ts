/**
 * Time bounds and retries for EventStoreDB calls whose outcome is unknown (deadline exceeded, unavailable, connection
 * reset): a bounded number of attempts with exponential backoff. Only calls that are safe to repeat are retried:
 * reads, and appends with caller-chosen event ids and an exact expected revision, which EventStoreDB recognises as a
 * repeat and answers with the original result.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DeadlineExceededError } from '@eventstore/db-client';
import { isTransient } from './eventstoredb-mapping.ts';

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { attempts: 5, baseDelayMs: 100, maxDelayMs: 2_000 };

/** The wait after failed attempt number `attempt` (from 1): base, 2×base, 4×base… capped at maxDelayMs. */
export const backoffMs = (policy: RetryPolicy, attempt: number): number =>
  Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));

/** Runs `op`, repeating it after a transient failure until `policy.attempts` are spent; other failures pass through. */
export async function withRetry<T>(op: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (attempt >= policy.attempts || !isTransient(err)) throw err;
      await sleep(backoffMs(policy, attempt));
    }
  }
}

/**
 * `call`, or the client's DeadlineExceededError when it has not settled within `ms`; `abandon` then releases it. The
 * client leaves some calls without a deadline (reads, and the server-features query an append starts with), so a
 * server that accepts the connection and never answers would otherwise hold the caller forever.
 */
export function withDeadline<T>(call: Promise<T>, ms: number, abandon?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abandon?.();
      reject(new DeadlineExceededError(undefined, `EventStoreDB did not answer within ${ms} ms`));
    }, ms);
  });
  call.catch(() => undefined); // an abandoned call may still fail later: nobody is waiting for it any more
  return Promise.race([call, expired]).finally(() => clearTimeout(timer));
}
