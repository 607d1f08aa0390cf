/**
 * Waiting on an execution's lifecycle as the activity read model shows it: until its entry satisfies a condition
 * (settled, started, moved from the step the model showed). Only the model moving wakes a wait, so a waiter costs
 * nothing between events; a follower is woken by the model's own next step for the execution and by nothing else
 * (other executions' events), whatever the steps are called, so it never spins.
 */
import type { ActivityEntry } from '../../projections/activity.projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';

const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Resolves true once the activity entry of `id` satisfies `done`, false at the deadline or when `stop` aborts; never
 * rejects. The model's position is read in the same tick as the entry, so an event appended after the check always
 * wakes the wait.
 */
export async function waitForEntry(
  activity: ReadModel,
  id: string,
  done: (x: ActivityEntry) => boolean,
  deadline: number,
  stop?: AbortSignal,
): Promise<boolean> {
  for (;;) {
    const position = activity.position;
    const x = activity.query.get(id) as ActivityEntry | undefined;
    if (x && done(x)) return true;
    // Looked at again only once the model moved: a timer that fires before the deadline (its clock is the event
    // loop's, read at the start of a turn, a busy turn earlier than Date.now) waits the rest without looking.
    for (let moved = false; !moved; ) {
      const left = deadline - Date.now();
      if (left <= 0 || stop?.aborted) return false;
      try {
        // A timer holds at most 2^31-1 ms (a longer one fires at once): a far deadline waits in turns.
        moved = await activity.waitFor(position + 1n, Math.min(left, MAX_TIMER_MS));
      } catch {
        // The read model failed: it will not move again; fall back to the deadline.
        await new Promise((r) => setTimeout(r, Math.min(left, 50)));
        moved = true;
      }
    }
  }
}

/** The step the model shows `id` at now (undefined before it folded the execution): what `waitPastStep` starts from. */
export const stepShown = (activity: ReadModel, id: string): string | undefined => (activity.query.get(id) as ActivityEntry | undefined)?.step;

/**
 * Resolves once the model shows `id` at another step than `shown`, or as waitForEntry. The model's steps only move
 * forwards, and it lags the actor: a `shown` read before the actor was looked at is at or before the step the
 * follower saw, so no move after that look is missed (a lagging model catching up wakes it once, early).
 */
export function waitPastStep(activity: ReadModel, id: string, shown: string | undefined, timeoutMs: number, stop: AbortSignal): Promise<boolean> {
  return waitForEntry(activity, id, (x) => x.step !== shown, Date.now() + timeoutMs, stop);
}
