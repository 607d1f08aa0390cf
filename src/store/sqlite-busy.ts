/**
 * SQLite fails a lock escalation at once, without calling its busy handler, where waiting could deadlock: processes
 * that each hold a shared lock and ask for more (two starters taking the data-directory lock, several openers switching
 * a new store to WAL) are refused together, and none goes on. Trying again after a short random pause lets one through.
 */

/** Runs `step` again while it fails with SQLITE_BUSY, for up to `timeoutMs`; synchronous, as better-sqlite3 is. */
export function untilNotBusy<T>(step: () => T, timeoutMs: number): T {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return step();
    } catch (e) {
      if (!isBusy(e) || performance.now() >= deadline) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2 + Math.random() * 10);
    }
  }
}

export const isBusy = (e: unknown): boolean => (e as { code?: string }).code === 'SQLITE_BUSY';
