/**
 * Wakes the SQLite store's live subscriptions: at once after an in-process commit, and by polling the table's head
 * for commits made by other processes sharing the file. It polls only while a subscription is waiting.
 */
interface Waiter {
  /** The last position the waiter has read: it wakes when the head moves past it. */
  after: bigint;
  wake(): void;
}

export class AppendSignal {
  private readonly waiters = new Set<Waiter>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly readHead: () => bigint,
    private readonly pollIntervalMs: number,
  ) {}

  /** Resolves once events after `after` may exist, or when `abort` fires. */
  wait(after: bigint, abort: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (abort.aborted) return resolve();
      const waiter: Waiter = {
        after,
        wake: () => {
          this.waiters.delete(waiter);
          abort.removeEventListener('abort', waiter.wake);
          if (this.waiters.size === 0) this.stopPolling();
          resolve();
        },
      };
      abort.addEventListener('abort', waiter.wake, { once: true });
      this.waiters.add(waiter);
      // Not unref'd: a process following the store (e.g. a CLI tail) must stay alive while it waits.
      this.timer ??= setInterval(() => this.poll(), this.pollIntervalMs);
    });
  }

  /** An in-process commit wrote events: every waiter reads on. */
  notify(): void {
    for (const w of [...this.waiters]) w.wake();
  }

  private poll(): void {
    let head: bigint;
    try {
      head = this.readHead();
    } catch {
      return; // A busy or closing database: the next tick tries again.
    }
    for (const w of [...this.waiters]) if (head > w.after) w.wake();
  }

  private stopPolling(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
