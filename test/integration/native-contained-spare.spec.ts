/**
 * Contained commands start in a sandbox made ahead of need (supervisor.sh `_bsv_spare -o`): the spare's sandbox was
 * up before the command was submitted, and the command sees exactly what an ordinary contained start gives it (env,
 * cwd, output, status). A spare belongs to one allocation: another allocation's command never runs in it.
 */
import { mkdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { sparesSettled } from '../../src/providers/native/supervisor-launcher.ts';
import { bwrapOrSkip, nativeFixture, run, spec, type Fixture } from './native-harness.ts';

const bwrap = bwrapOrSkip();
/** A spare waits this long before the probe is submitted; its pid 1 started at least that much before the probe. */
const WAIT_MS = 80;
const TICK_MS = 10;

/** Prints how many clock ticks the sandbox's pid 1 started before the probe's own shell, then what the probe sees. */
const probe = [
  'start() { read -r s </proc/$1/stat; set -- ${s##*) }; shift 19; echo "$1"; }',
  'echo $(( $(start self) - $(start 1) ))',
  'pwd; env | sort; echo to-stderr >&2; exit 7',
].join('; ');

/** A stdin run's writer is made once its submit answered: close it as soon as it exists. */
async function endStdin(fx: Fixture, operationId: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    try {
      return await fx.executor.endStdin(operationId);
    } catch {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

describe.skipIf(!bwrap)('contained spare sandboxes', () => {
  const fixtures: Fixture[] = [];
  /** An allocation (its spool made, as allocate makes it) whose executor has run one contained command. */
  const fixture = async (warm = true): Promise<Fixture> => {
    const fx = nativeFixture({ provider: 'native', contain: true, network: 'none' });
    fixtures.push(fx);
    mkdirSync(fx.spoolDir, { recursive: true });
    if (warm) expect((await run(fx.executor, spec(['true']))).receipt.exitCode).toBe(0);
    return fx;
  };
  afterEach(async () => {
    for (const fx of fixtures.splice(0)) {
      fx.executor.close();
      await fx.cleanup();
    }
  });

  /** Runs the probe after the spare (if any) is up and has waited a while; whether its sandbox was, and what it saw. */
  async function probeRun(fx: Fixture, cwd = '/tmp/work/sub', stdin = false) {
    await sparesSettled();
    await new Promise((r) => setTimeout(r, WAIT_MS));
    const s = spec(['/bin/sh', '-c', probe], { cwd, stdin });
    const pending = run(fx.executor, s);
    if (stdin) await endStdin(fx, s.operationId);
    const { receipt, stdout, stderr } = await pending;
    const [ticks, ...seen] = stdout.toString().trimEnd().split('\n');
    return { receipt, stderr: stderr.toString(), sandboxUpBeforeSubmit: Number(ticks) * TICK_MS >= WAIT_MS / 2, seen: seen.join('\n') };
  }

  it('should start the next contained command in a sandbox that was up before it was submitted, seeing what an ordinary start sees', async () => {
    const fx = await fixture();
    const second = await probeRun(fx);
    // The same command started the ordinary way (the spare's key holds the cwd's sandbox: with stdin, none is used).
    const first = await probeRun(fx, '/tmp/work/sub', true);
    expect(first.sandboxUpBeforeSubmit).toBe(false);
    expect(second.sandboxUpBeforeSubmit).toBe(true);
    for (const r of [first, second]) {
      expect(r.receipt.exitCode).toBe(7);
      expect(r.stderr).toBe('to-stderr\n');
    }
    expect(second.seen).toBe(first.seen);
    expect(second.seen.split('\n')[0]).toBe('/tmp/work/sub');
    expect(second.seen).toContain('HOME=/tmp');
  });

  it('should never run a command of one allocation in the spare sandbox of another', async () => {
    const a = await fixture();
    const b = await fixture(false);
    const inB = await probeRun(b);
    expect(inB.sandboxUpBeforeSubmit).toBe(false);
    // A's spare was left for A.
    expect((await probeRun(a)).sandboxUpBeforeSubmit).toBe(true);
  });
});
