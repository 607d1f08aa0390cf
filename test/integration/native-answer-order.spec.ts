/**
 * A supervisor's subshell answers its own end (launcher.sh `rSEQ`), so on a busy host its `x` can be read before the
 * launcher's `s` that gives its pid: the native-exec bench saw a successful `true` reported as "the supervisor exited
 * with status 0 without a receipt" (about once in 1,500 commands at 100 at once). Which of two processes writes first
 * cannot be chosen for real, so this spec wraps the real launch (real launcher, supervisor and command) and only lets
 * the executor learn the pid after the exit, as that race does.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nativeFixture, spec, type Fixture } from './native-harness.ts';

vi.mock('../../src/providers/native/supervisor-launcher.ts', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/providers/native/supervisor-launcher.ts')>();
  return {
    ...actual,
    superviseRun: (...args: Parameters<typeof actual.superviseRun>) => {
      const launch = actual.superviseRun(...args);
      return { exited: launch.exited, pid: launch.exited.then(() => new Promise((r) => setTimeout(r, 50))).then(() => launch.pid) };
    },
  };
});

let fx: Fixture | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('a supervisor whose end is heard before its start', () => {
  it('should report the command that ran, from its receipt, not an error', async () => {
    fx = nativeFixture();
    for (const [command, exitCode] of [[['true'], 0], [['sh', '-c', 'echo out; exit 3'], 3]] as const) {
      const s = spec([...command], { settleMs: 0 });
      const receipt = await fx.executor.submit(s);
      expect(receipt).toMatchObject({ state: 'exited', exitCode });
    }
  });
});
