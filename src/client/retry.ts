/**
 * Retries one idempotent request while it fails transiently: the same request (same operation id or key) is sent
 * again, so a lost answer never makes a second resource. 4xx answers are final.
 */
import { BerthApiError } from './berth-api-error.ts';
import { Backoff, type BackoffOptions } from './reconnect-backoff.ts';

/** Network faults and 5xx are worth retrying with the same idempotent request; 4xx answers are final. */
export const transient = (error: unknown): boolean =>
  error instanceof BerthApiError ? error.retryable : error instanceof TypeError; // fetch failed: refused, reset

export async function retrying<T>(request: () => Promise<T>, options?: BackoffOptions, signal?: AbortSignal): Promise<T> {
  const backoff = new Backoff(options);
  for (;;) {
    try {
      return await request();
    } catch (error) {
      if (!transient(error) || signal?.aborted) throw error;
      await backoff.wait(error, signal);
    }
  }
}

/** One idempotent request retried with the client's backoff: the one wrapper every retried call goes through. */
export type Retry = <T>(request: () => Promise<T>, signal?: AbortSignal) => Promise<T>;

export const retrier =
  (options?: BackoffOptions): Retry =>
  (request, signal) =>
    retrying(request, options, signal);
