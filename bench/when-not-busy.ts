/**
 * A release or delete right after a command finished: the command's use of the allocation is given back just after
 * its outcome is saved, and a release or delete in between is refused `environment_busy` (retryable, as documented).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isBerthError } from '../schemas/errors.ts';

/** Runs `call` again while it is refused `environment_busy`; any other error is thrown. */
export async function whenNotBusy<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!isBerthError(e, 'environment_busy')) throw e;
      await sleep(10);
    }
  }
}
