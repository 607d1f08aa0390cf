/**
 * Per-actor mailboxes (DESIGN §4 rule 8): jobs for one key run one after another, in the order they were posted;
 * jobs for different keys run concurrently. A failing job does not stop the ones behind it.
 */
interface Letter {
  job: () => Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export class Mailboxes {
  /** Keys with a job running, each with the jobs waiting behind it. */
  private readonly waiting = new Map<string, Letter[]>();

  // A queue per key instead of a promise chain: the chain cost three promises and their closures per job, and every
  // actor transition posts one.
  post<T>(key: string, job: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const letter: Letter = { job, resolve: resolve as Letter['resolve'], reject };
      const queue = this.waiting.get(key);
      if (queue) queue.push(letter);
      else {
        this.waiting.set(key, []);
        // As a chained job would: never inside the caller's own turn.
        queueMicrotask(() => this.run(key, letter));
      }
    });
  }

  get size(): number {
    return this.waiting.size;
  }

  private run(key: string, letter: Letter): void {
    let result: Promise<unknown>;
    try {
      result = letter.job();
    } catch (e) {
      letter.reject(e);
      return this.next(key);
    }
    result.then(
      (value) => {
        letter.resolve(value);
        this.next(key);
      },
      (error) => {
        letter.reject(error);
        this.next(key);
      },
    );
  }

  /** Starts the key's next job, or forgets the mailbox once it is drained, so idle actors cost nothing. */
  private next(key: string): void {
    const letter = this.waiting.get(key)!.shift();
    if (letter) this.run(key, letter);
    else this.waiting.delete(key);
  }
}
