/**
 * Polls a condition with a short growing interval (up to `maxDelayMs`) until it holds or the deadline passes (then
 * `unavailable`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../../../schemas/errors.ts';

export async function waitUntil(check: () => Promise<boolean>, deadline: number, maxDelayMs = 50): Promise<void> {
  let delay = 2;
  while (!(await check())) {
    if (Date.now() >= deadline) throw new BerthError('unavailable', 'Timed out waiting for the resource to settle.', {});
    await sleep(delay);
    delay = Math.min(delay * 2, maxDelayMs);
  }
}
