/**
 * Long synchronous filesystem work (a capture or an apply of thousands of entries) cut into slices: the caller asks
 * `breathe()` between entries, and every few milliseconds the event loop gets a turn, so a server stays responsive.
 */
export class EventLoopSlices {
  private sliceStart = performance.now();

  constructor(private readonly sliceMs = 8) {}

  /** A promise to await when the slice is over (the event loop then gets its turn), else undefined: no await at all. */
  breathe(): Promise<void> | undefined {
    if (performance.now() - this.sliceStart < this.sliceMs) return undefined;
    return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.sliceStart = performance.now();
    });
  }
}
