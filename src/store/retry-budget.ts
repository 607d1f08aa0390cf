/**
 * One retry budget per store call: an adapter that already repeated a call whose outcome is unknown (same ids, same
 * expected revision) marks the `unavailable` error it gives up with, and a caller that would repeat it reports it
 * instead, so that the attempts of the adapter and of its callers do not multiply.
 */
import { isBerthError } from '../../schemas/errors.ts';

/** The detail an adapter adds to the `unavailable` error after spending its own retries. */
export const retriesSpent = { retriesSpent: true } as const;

export const hasSpentRetries = (e: unknown): boolean => isBerthError(e, 'unavailable') && e.detail.retriesSpent === true;
