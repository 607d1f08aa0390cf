/** Exponential backoff with jitter for reconnecting clients, giving up after a bounded time without success. */
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  /** Give up when failures have lasted this long since the last success. Default 60 s. */
  giveUpAfterMs?: number;
}

export class Backoff {
  private attempt = 0;
  private failingSince: number | undefined;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly giveUpAfterMs: number;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 50;
    this.maxMs = options.maxMs ?? 2000;
    this.giveUpAfterMs = options.giveUpAfterMs ?? 60_000;
  }

  /** Call after a success: the next failure starts from the initial delay. */
  reset(): void {
    this.attempt = 0;
    this.failingSince = undefined;
  }

  /** Waits before the next attempt; rethrows `cause` when failures have lasted too long. */
  async wait(cause: unknown, signal?: AbortSignal): Promise<void> {
    this.failingSince ??= Date.now();
    if (Date.now() - this.failingSince > this.giveUpAfterMs) throw cause;
    const ceiling = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt++);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay);
      signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
  }
}
