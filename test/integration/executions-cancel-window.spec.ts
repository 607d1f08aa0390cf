/**
 * A cancel that arrives while the execution is being dispatched (accepted, dispatched, the submit in flight) must
 * still stop the command: it is persisted at once and sent as soon as the receipt says running.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Berth } from '../../src/runtime/berth.ts';
import { caller, environmentFor, settled, startTestBerth, tempDir } from './executions-harness.ts';

describe('cancel during dispatch (native)', () => {
  const dir = tempDir('berth-cancel-window-');
  let berth: Berth;
  beforeAll(async () => {
    berth = await startTestBerth(dir.path, false);
  });
  afterAll(async () => {
    await berth.stop();
    dir.remove();
  });

  it('should cancel a command whose cancel came 0–25 ms after submit, long before it would exit', async () => {
    const environment = await environmentFor(berth.api, 'native');
    for (const delayMs of [0, 5, 10, 15, 25]) {
      const started = Date.now();
      const record = await berth.api.submitExecution(caller, { operationId: `window-${delayMs}-${started}`, environment, command: ['sleep', '30'] });
      await new Promise((r) => setTimeout(r, delayMs));
      await berth.api.cancelExecution(caller, record.id);
      const done = await settled(berth.api, record.id, 20_000);
      expect(done.status, `cancel after ${delayMs} ms`).toBe('cancelled');
      expect(Date.now() - started, `cancel after ${delayMs} ms`).toBeLessThan(10_000);
    }
  });
});
