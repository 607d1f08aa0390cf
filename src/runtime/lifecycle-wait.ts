/**
 * Waiting for an execution's lifecycle to move past a step, on the activity read model: a follower that read step S
 * is woken by the first step after S, and by nothing else (other executions' events, or the model catching up to S
 * itself after lagging behind the actor), so it never spins.
 */
import type { ActivityEntry } from '../projections/activity.projection.ts';
import type { ReadModel } from '../projections/read-model.ts';

/** The steps in the order an execution goes through them while its output can still change. */
const UNSETTLED_ORDER = ['pristine', 'accepted', 'dispatched', 'running', 'exited', 'drained'];

/** True once the activity model shows `id` at a step after `step` (every settled step is after the unsettled ones). */
function isPast(activity: ReadModel, id: string, step: string): boolean {
  const entry = activity.query.get(id) as ActivityEntry | undefined;
  if (!entry) return false;
  const at = UNSETTLED_ORDER.indexOf(entry.step);
  return at < 0 || at > UNSETTLED_ORDER.indexOf(step);
}

/** Resolves once `id` is past `step`, after `timeoutMs`, or when `stop` aborts; never rejects. */
export async function waitPastStep(activity: ReadModel, id: string, step: string, timeoutMs: number, stop: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!stop.aborted && !isPast(activity, id, step)) {
    const left = deadline - Date.now();
    if (left <= 0) return;
    const moved = await activity.waitFor(activity.position + 1n, left).catch(async () => {
      // A failed model never moves again: the deadline is all that is left.
      await new Promise((resolve) => setTimeout(resolve, left));
      return false;
    });
    if (!moved) return;
  }
}
