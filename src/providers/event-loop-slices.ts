/**
 * Long synchronous filesystem work (a capture or an apply of thousands of entries) cut into slices: the caller asks
 * `breathe()` between entries, and every few milliseconds the event loop gets a turn, so a server stays responsive.
 */
export class EventLoopSlices {
  private sliceStart = performance.now();

  constructor(private readonly sliceMs = 8) {}

  /** True when the event loop was given a turn (time-sensitive state taken before it may be stale). */
  async breathe(): Promise<boolean> {
    if (performance.now() - this.sliceStart < this.sliceMs) return false;
    await new Promise((resolve) => setImmediate(resolve));
    this.sliceStart = performance.now();
    return true;
  }
}
