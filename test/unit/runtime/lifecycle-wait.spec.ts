/**
 * waitForEntry with a far deadline (a turn waits for its shell command to settle, however long it runs): each wait
 * it hands the read model must fit a Node timer (at most 2^31-1 ms). A longer one fires at once with a
 * TimeoutOverflowWarning, and the loop spun every millisecond while any such command ran. The read model here is a
 * stand-in that records the timeouts it is given (the real one's timer is exactly what overflowed).
 */
import { describe, expect, it } from 'vitest';
import type { ReadModel } from '../../../src/projections/read-model.ts';
import { waitForEntry } from '../../../src/runtime/executions/lifecycle-wait.ts';

describe('waitForEntry', () => {
  it('never asks for a wait longer than a timer can hold, and ends when stopped', async () => {
    const timeouts: number[] = [];
    const stop = new AbortController();
    const model = {
      position: 0n,
      query: { get: () => undefined },
      waitFor: (_position: bigint, ms: number) => {
        timeouts.push(ms);
        // The model moves on (another execution's event) without this one settling.
        return new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5));
      },
    } as unknown as ReadModel;
    const waiting = waitForEntry(model, 'hexe_x', () => false, Number.MAX_SAFE_INTEGER, stop.signal);
    await new Promise((r) => setTimeout(r, 30));
    stop.abort();
    expect(await waiting).toBe(false);
    expect(timeouts.length).toBeGreaterThan(0);
    expect(Math.max(...timeouts)).toBeLessThanOrEqual(2 ** 31 - 1);
  });
});
