/**
 * The native launcher (supervisor-launcher.ts + launcher.sh): programs start outside the runtime's session with
 * exactly the environment and argv given (odd bytes included), their exit status comes back, and a launcher that
 * went away is replaced while the programs it started are left alone. Supervisors run in the launcher's own subshell
 * and claim with their pid and start time.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { launchDetached, superviseDetached } from '../../../src/providers/native/supervisor-launcher.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-launcher-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sessionOf = (pid: number | string): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
};

/** The launcher process of this test process (its only child running launcher.sh). */
function launcherPid(): number | undefined {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher.sh')) return Number(pid);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe('launchDetached', () => {
  it('runs a program with exactly the argv and environment given, odd bytes and names included', async () => {
    const odd = `it's "quoted" \\ $HOME \`x\` ;|&*?[] ~ é \u0001\nsecond line\n`;
    const out = join(dir, 'out');
    // The program's environment as the kernel handed it over, and its first argument.
    const script = 'cat /proc/$$/environ >"$2.env"; printf %s "$1" >"$2"';
    const outcome = await launchDetached(['/bin/sh', '-c', script, 'sh', odd, out], { ODD: odd, 'NOT-AN-IDENTIFIER': 'x y' }).exited;
    expect(outcome).toEqual({ code: 0 });
    expect(readFileSync(out, 'utf8')).toBe(odd);
    // Nothing of the runtime's own environment: only what was given.
    expect(readFileSync(`${out}.env`, 'utf8').split('\0').filter(Boolean).sort()).toEqual(['NOT-AN-IDENTIFIER=x y', `ODD=${odd}`]);
  });

  it('hands plain names over the same way, with only the PWD any sh exports', async () => {
    const out = join(dir, 'plain');
    const env = { PATH: '/usr/bin:/bin', HOME: '/nowhere', MULTI: "a'b\nc", EMPTY: '' };
    const outcome = await launchDetached(['/bin/sh', '-c', 'cat /proc/$$/environ >"$1"', 'sh', out], env).exited;
    expect(outcome).toEqual({ code: 0 });
    const given = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    expect(readFileSync(out, 'utf8').split('\0').filter(Boolean).sort()).toEqual([...given, 'PWD=/'].sort());
  });

  it('answers the exit status, 128+n for a signal, and runs outside the runtime session', async () => {
    expect(await launchDetached(['/bin/sh', '-c', 'exit 3'], {}).exited).toEqual({ code: 3 });
    expect(await launchDetached(['/bin/sh', '-c', 'kill -TERM $$'], {}).exited).toEqual({ code: 143 });
    const out = join(dir, 'session');
    const launch = launchDetached(['/bin/sh', '-c', `echo $$ > ${out}; cut -d' ' -f6 /proc/$$/stat >> ${out}`], {});
    const pid = await launch.pid;
    await launch.exited;
    const [self, session] = readFileSync(out, 'utf8').trim().split('\n').map(Number);
    // The pid answered is the program's own (a supervisor claims with it).
    expect(self).toBe(pid);
    expect(session).not.toBe(sessionOf(process.pid));
  });

  it('answers an error for what was pending when the launcher went away, and starts a new one after', async () => {
    await launchDetached(['/bin/true'], {}).exited;
    const first = launcherPid();
    expect(first).toBeDefined();
    const pending = launchDetached(['/bin/sleep', '1'], {}).exited;
    await new Promise((r) => setTimeout(r, 100));
    process.kill(first!, 'SIGKILL');
    expect(await pending).toMatchObject({ error: expect.any(Error) });
    expect(await launchDetached(['/bin/sh', '-c', 'exit 4'], {}).exited).toEqual({ code: 4 });
    expect(launcherPid()).not.toBe(first);
  });
});

describe('superviseDetached', () => {
  const startTimeOf = (pid: number): string => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  };

  it('runs a supervisor in the launcher subshell: it claims with its own pid and start time, and the command gets exactly its env', async () => {
    const op = join(dir, 'op-plain');
    mkdirSync(op);
    const out = join(dir, 'plain-env');
    const env = { PATH: '/usr/bin:/bin', GREETING: "it's" };
    const launch = superviseDetached(['run', op, '--', '/bin/sh', '-c', 'cat /proc/$$/environ >"$1"; sleep 0.3', 'sh', out], env);
    const pid = (await launch.pid)!;
    while (!existsSync(join(op, 'started'))) await new Promise((r) => setTimeout(r, 5));
    expect(readFileSync(join(op, 'claim'), 'utf8')).toBe(`supervisor ${pid} ${startTimeOf(pid)}\n`);
    expect(JSON.parse(readFileSync(join(op, 'started'), 'utf8')).supervisor).toBe(pid);
    expect(await launch.exited).toEqual({ code: 0 });
    expect(JSON.parse(readFileSync(join(op, 'receipt'), 'utf8'))).toMatchObject({ status: 0 });
    expect(readFileSync(out, 'utf8').split('\0').filter(Boolean).sort()).toEqual(['GREETING=it\'s', 'PATH=/usr/bin:/bin', 'PWD=/']);
  });

  it("hands variables named like the launcher's own over intact (the supervisor then runs as its own program)", async () => {
    const op = join(dir, 'op-own-names');
    mkdirSync(op);
    const out = join(dir, 'own-names-env');
    const env = { PATH: '/usr/bin:/bin', _l_nl: 'mine', _l_cmd: 'also\nmine' };
    const outcome = await superviseDetached(['run', op, '--', '/bin/sh', '-c', 'cat /proc/$$/environ >"$1"', 'sh', out], env).exited;
    expect(outcome).toEqual({ code: 0 });
    expect(readFileSync(out, 'utf8').split('\0').filter(Boolean).sort()).toEqual(['PATH=/usr/bin:/bin', 'PWD=/', '_l_cmd=also\nmine', '_l_nl=mine']);
  });
});
