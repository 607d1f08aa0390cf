/**
 * Turns at the store's reads for audit feeds, one lane per scope: a page read by one of a scope's feeds waits for
 * the pages its other feeds asked for first, and each turn lasts until the event loop turns. A member's feed reads the
 * whole log past its start (others' events are passed over where they are read), so 32 listings of one token read
 * 32 times as fast as one and left the other tenants the rest; in a lane they read no faster than one, and each scope's
 * lane, the admin's too, gets its page per turn of the loop.
 */
export class ScanLanes {
  /** Per scope: settles when the last turn asked for so far has ended. */
  private readonly tails = new Map<string, Promise<void>>();

  /** Resolves when it is this reader's turn in `scope`'s lane; the turn ends when the event loop next turns. */
  turn(scope: string): Promise<void> {
    const before = this.tails.get(scope) ?? Promise.resolve();
    const mine = before.then(() => new Promise<void>((ended) => setImmediate(ended)));
    this.tails.set(scope, mine);
    void mine.then(() => {
      if (this.tails.get(scope) === mine) this.tails.delete(scope);
    });
    return before;
  }
}
