/**
 * Per-actor mailboxes (DESIGN §4 rule 8): jobs for one key run one after another, in the order they were posted;
 * jobs for different keys run concurrently. A failing job does not stop the ones behind it.
 */
export class Mailboxes {
  private readonly tails = new Map<string, Promise<unknown>>();

  post<T>(key: string, job: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const run = previous.then(job);
    const tail = run.then(
      () => {},
      () => {},
    );
    this.tails.set(key, tail);
    // Forget the mailbox once it is drained, so idle actors cost nothing.
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }

  /** Whether no job for `key` is queued or running. */
  idle(key: string): boolean {
    return !this.tails.has(key);
  }

  get size(): number {
    return this.tails.size;
  }
}
