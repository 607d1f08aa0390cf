/**
 * The launcher's answers (supervisor-launcher.ts `answer`): a supervisor's subshell answers its own end (launcher.sh
 * `rSEQ`), so its `x` can be read before the launcher's `s`. The native-exec bench saw a successful `true` reported as
 * "the supervisor exited with status 0 without a receipt" (about once in 1,500 commands at 100 at once): the submit
 * heard the end with no pid, so it could not read the claim as its own. A launch's `exited` now never comes before
 * its `pid`, whichever answer is read first.
 */
import { describe, expect, it } from 'vitest';
import { answer, type LaunchOutcome, type Pending } from '../../../src/providers/native/supervisor-launcher.ts';

/** A request as the Launcher keeps it, and what its consumer hears, in order. */
function request() {
  const heard: string[] = [];
  let started!: (pid: number | undefined) => void;
  let exited!: (outcome: LaunchOutcome) => void;
  void new Promise<number | undefined>((r) => (started = r)).then((pid) => heard.push(`pid ${pid}`));
  void new Promise<LaunchOutcome>((r) => (exited = r)).then((o) => heard.push(`exit ${'code' in o ? o.code : o.error.message}`));
  const p: Pending = { started, exited, held: true, answersItself: true };
  return { p, heard };
}

describe('the launcher\'s answers to a request', () => {
  it('should tell the pid before the end when the end is read first', async () => {
    const { p, heard } = request();
    answer(p, 'x', 0);
    await Promise.resolve();
    expect(heard).toEqual([]);
    answer(p, 's', 4242);
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(['pid 4242', 'exit 0']);
    expect(p).toMatchObject({ pid: 4242, ended: true });
  });

  it('should tell them as read when the start comes first', async () => {
    const { p, heard } = request();
    answer(p, 's', 7);
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(['pid 7']);
    answer(p, 'x', 3);
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(['pid 7', 'exit 3']);
  });
});
