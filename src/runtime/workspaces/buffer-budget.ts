/**
 * Bytes of whole files the file tools hold in memory at once, for the whole process: an edit holds its file twice
 * (the bytes read, and the bytes with the text replaced), so 24 edits of 64 MiB files sent together held 2.5 GB and
 * stalled the event loop 8 s. Past the budget a call waits its turn, first come first served; one larger than the
 * whole budget runs alone.
 */
export class BufferBudget {
  private used = 0;
  private readonly waiting: { bytes: number; go: () => void }[] = [];

  constructor(readonly capacity: number) {}

  /** Runs `work` once `bytes` fit in the budget, and gives them back when it settles. */
  async holding<T>(bytes: number, work: () => Promise<T>): Promise<T> {
    const share = Math.min(Math.max(0, bytes), this.capacity);
    if (this.waiting.length === 0 && this.used + share <= this.capacity) this.used += share;
    else await new Promise<void>((go) => this.waiting.push({ bytes: share, go }));
    try {
      return await work();
    } finally {
      this.used -= share;
      this.wake();
    }
  }

  /** Bytes held now (tests). */
  get held(): number {
    return this.used;
  }

  private wake(): void {
    while (this.waiting.length > 0 && this.used + this.waiting[0].bytes <= this.capacity) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.go();
    }
  }
}

/** The file tools' one budget: two 64 MiB edits at once, many small ones. */
export const wholeFileBudget = new BufferBudget(256 * 1024 * 1024);
