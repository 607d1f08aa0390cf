/**
 * When a warm pool may start another allocation: at once while refills succeed, one at a time with a doubling
 * delay (1 s up to 60 s) after a failure, and never more than MAX_ATTEMPTS_PER_MINUTE starts in any minute, so a
 * pool whose image is missing does not re-create forever.
 */
const FIRST_DELAY_MS = 1_000;
const MAX_DELAY_MS = 60_000;
export const MAX_ATTEMPTS_PER_MINUTE = 10;

export class RefillBackoff {
  private failures = 0;
  private notBefore = 0;
  private lastError: string | null = null;
  private lastErrorAt: number | null = null;
  /** When each start of the last minute happened. */
  private starts: number[] = [];

  /** How many of `lacking` allocations may start now. */
  allowed(lacking: number, now: number): number {
    if (lacking <= 0 || now < this.notBefore) return 0;
    this.starts = this.starts.filter((t) => now - t < 60_000);
    const room = MAX_ATTEMPTS_PER_MINUTE - this.starts.length;
    return Math.max(0, Math.min(lacking, room, this.failures > 0 ? 1 : lacking));
  }

  attempted(now: number): void {
    this.starts.push(now);
  }

  failed(reason: string, now: number): void {
    this.failures++;
    this.lastError = reason;
    this.lastErrorAt = now;
    this.notBefore = now + Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (this.failures - 1));
  }

  /** A member became ready: back to refilling at once (the last error stays visible). */
  succeeded(): void {
    this.failures = 0;
    this.notBefore = 0;
  }

  status() {
    return {
      consecutiveFailures: this.failures,
      lastError: this.lastError,
      lastErrorAt: this.lastErrorAt,
      nextAttemptAt: this.failures > 0 ? this.notBefore : null,
      attemptsLastMinute: this.starts.length,
    };
  }
}
