/**
 * Waiting on an execution's lifecycle as the activity read model shows it: until its entry satisfies a condition
 * (settled, started, past the step a follower read). Only the model moving wakes a wait, so a waiter costs nothing
 * between events; a follower that read step S is woken by the first step after S and by nothing else (other
 * executions' events, or the model catching up to S itself after lagging behind the actor), so it never spins.
 */
import type { ActivityEntry } from '../../projections/activity.projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';

const MAX_TIMER_MS = 2 ** 31 - 1;

/** The steps in the order an execution goes through them while its output can still change, as the model shows them. */
const UNSETTLED_ORDER = ['pristine', 'accepted', 'dispatched', 'running', 'exited', 'drained'];
/**
 * Steps of the actor that the model shows as another: `checkpointing` (a command in a turn) comes of
 * execution.drained, folded as `drained`. Counted as unknown, the model's `drained` was past it: a follower that read
 * `checkpointing` was woken at once, forever, without a macrotask between, and the whole server stopped (the
 * checkpoint it waited for too).
 */
const SHOWN_AS: Record<string, string> = { checkpointing: 'drained' };

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
    const left = deadline - Date.now();
    if (left <= 0 || stop?.aborted) return false;
    try {
      // A timer holds at most 2^31-1 ms (a longer one fires at once): a far deadline waits in turns.
      await activity.waitFor(position + 1n, Math.min(left, MAX_TIMER_MS));
    } catch {
      // The read model failed: it will not move again; fall back to the deadline.
      await new Promise((r) => setTimeout(r, Math.min(left, 50)));
    }
  }
}

/** Resolves once `id` is at a step after `step` (every settled step is after the unsettled ones), or as waitForEntry. */
export function waitPastStep(activity: ReadModel, id: string, step: string, timeoutMs: number, stop: AbortSignal): Promise<boolean> {
  const after = UNSETTLED_ORDER.indexOf(SHOWN_AS[step] ?? step);
  const past = (x: ActivityEntry) => {
    const at = UNSETTLED_ORDER.indexOf(x.step);
    // Unlisted steps are the settled ones, after every listed step; a listed one is never after an unknown `step`
    // (its follower then waits out its timeout instead of spinning).
    return at < 0 ? x.step !== step : after >= 0 && at > after;
  };
  return waitForEntry(activity, id, past, Date.now() + timeoutMs, stop);
}
