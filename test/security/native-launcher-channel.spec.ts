/**
 * The native launcher's answer channel is the runtime's word on how each command ended: a supervisor's subshell
 * answers on fd 7, the launcher's socket to the runtime (launcher.sh `rSEQ`). A tenant's contained command that
 * could write there would forge the end of any execution (its own, another scope's) before it ends. Every command
 * of an allocation is tried, the first (started by a supervisor) and the next (handed to the sandbox made ahead of
 * need): neither holds any descriptor of the launcher's, so a forged answer has nowhere to go and each execution
 * reports the status its command really exited with.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrap, sandboxGround, type SandboxGround } from './native-sandbox-fixture.ts';

const FORGE = [
  // Every descriptor the shell could inherit, written with a forged "exited 0" for the first launches.
  'for fd in 3 4 5 6 7 8 9; do for seq in 1 2 3 4 5 6 7 8 9 10; do (eval "echo x $seq 0 >&$fd") 2>/dev/null && echo "wrote $fd"; done; done',
  // Any socket among its descriptors (the launcher's stdout is one).
  'ls -l /proc/self/fd/ | grep -c socket:',
  'sleep 0.3',
  'exit 5',
].join('; ');

describe.skipIf(!bwrap)('a contained command cannot forge how executions end', () => {
  let g: SandboxGround;

  beforeAll(async () => {
    g = await sandboxGround('Channel');
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  it('holds no launcher descriptor, on a fresh sandbox and on the one made ahead of need, and its real status stands', async () => {
    for (let i = 0; i < 3; i++) {
      const { record, stdout } = await g.sh(FORGE);
      expect(stdout).toBe('0\n');
      expect(record).toMatchObject({ status: 'exited', exitCode: 5 });
    }
  });

  it('an execution running beside the attempts is not ended by them', async () => {
    const [attacker, victim] = await Promise.all([g.sh(FORGE), g.sh('sleep 0.5; echo done; exit 3')]);
    expect(attacker.record).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(victim.record).toMatchObject({ status: 'exited', exitCode: 3 });
    expect(victim.stdout).toBe('done\n');
  });
});
