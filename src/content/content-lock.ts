/**
 * One in-process lock per environment content directory: publishing steps (a file's rename, an import's swap, a
 * version's snapshot) run one at a time, so a snapshot never sees half of an import. Work that takes long (streaming
 * a body, unpacking an archive into staging) runs outside the lock. Across processes the environment's actor is the
 * single writer.
 */
const tails = new Map<string, Promise<unknown>>();

export async function withContentLock<T>(dir: string, work: () => Promise<T>): Promise<T> {
  const previous = tails.get(dir) ?? Promise.resolve();
  const run = previous.then(work, work);
  const tail = run.catch(() => undefined);
  tails.set(dir, tail);
  try {
    return await run;
  } finally {
    if (tails.get(dir) === tail) tails.delete(dir);
  }
}
