/**
 * The native launcher (supervisor-launcher.ts + launcher.sh): programs start outside the runtime's session with
 * exactly the environment and argv given (odd bytes included), their exit status comes back, and a launcher that
 * went away is replaced while the programs it started are left alone. Supervisors run in the launcher's own subshell
 * and claim with their pid and start time.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { launchDetached, superviseDetached, superviseRun } from '../../../src/providers/native/supervisor-launcher.ts';
import { waitFor } from '../../fixtures/wait-for.ts';
import { launcherPid } from '../../integration/native-harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-launcher-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const livePids = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p));
const cmdline = (pid: string): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

const sessionOf = (pid: number | string): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
};

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
    const marker = `pending-${process.pid}-${Date.now()}`;
    const pending = launchDetached(['/bin/sh', '-c', 'sleep 1; :', marker], {}).exited;
    // The launcher has started it (its program runs): the request is in flight when the launcher goes.
    await waitFor(() => livePids().some((p) => cmdline(p).includes(marker)), { timeoutMs: 5_000, what: 'the launcher to start the pending program' });
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
    await waitFor(() => existsSync(join(op, 'started')), { intervalMs: 5, what: 'the supervisor to record the start' });
    expect(readFileSync(join(op, 'claim'), 'utf8')).toBe(`supervisor ${pid} ${startTimeOf(pid)}\n`);
    expect(JSON.parse(readFileSync(join(op, 'started'), 'utf8')).supervisor).toBe(pid);
    expect(await launch.exited).toEqual({ code: 0 });
    expect(JSON.parse(readFileSync(join(op, 'receipt'), 'utf8'))).toMatchObject({ status: 0 });
    expect(readFileSync(out, 'utf8').split('\0').filter(Boolean).sort()).toEqual(['GREETING=it\'s', 'PATH=/usr/bin:/bin', 'PWD=/']);
  });

  it("answers a supervisor's end from its own subshell, and one killed without answering as an error", async () => {
    const op = join(dir, 'op-killed');
    mkdirSync(op);
    const launch = superviseDetached(['run', op, '--', '/bin/sleep', '1000'], { PATH: '/usr/bin:/bin' });
    const pid = (await launch.pid)!;
    await waitFor(() => existsSync(join(op, 'started')), { intervalMs: 5, what: 'the supervisor to record the start' });
    const command: number = JSON.parse(readFileSync(join(op, 'started'), 'utf8')).pid;
    process.kill(pid, 'SIGKILL');
    expect(await launch.exited).toMatchObject({ error: expect.any(Error) });
    process.kill(command, 'SIGKILL');
  });

  it("gives what it starts none of the launcher's descriptors: a command cannot write the runtime's answers", async () => {
    const op = join(dir, 'op-fds');
    mkdirSync(op);
    // The command's own descriptors, from its shell: none is the launcher's socket to the runtime (its stdout, which
    // the launcher's subshell holds as fd 7 to answer on).
    const outcome = await superviseDetached(['run', op, '--', '/bin/sh', '-c', 'ls -l /proc/$$/fd'], { PATH: '/usr/bin:/bin' }).exited;
    expect(outcome).toEqual({ code: 0 });
    const fds = readFileSync(join(op, 'stdout'), 'utf8');
    expect(fds).toMatch(/ 1 -> .*\/stdout/);
    expect(fds).not.toMatch(/socket:| 7 -> /);
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

describe('spare supervisors', () => {
  const spareDirs = () =>
    readdirSync(tmpdir())
      .filter((n) => n.startsWith(`berth-spares-${process.pid}-`))
      .flatMap((root) => readdirSync(join(tmpdir(), root)).map((d) => join(tmpdir(), root, d)))
      .filter((d) => existsSync(join(d, 'req')));

  it('hands a run to the spare made after the last one: own session, exact environment, output in the spool', async () => {
    const first = join(dir, 'op-first');
    mkdirSync(first);
    expect(await superviseRun({ dir: first, cwd: '/', graceMs: 100, stdin: false, argv: ['/bin/true'] }, { PATH: '/usr/bin:/bin' }).exited).toEqual({ code: 0 });
    const spares = await waitFor(spareDirs, { until: (d) => d.length > 0, what: 'a spare made after the run' });
    expect(spares).toHaveLength(1);
    await waitFor(() => existsSync(join(spares[0], 'ready')), { what: 'the spare to wait for a request' });

    const op = join(dir, 'op-spare');
    mkdirSync(op);
    const script = `cat /proc/$$/environ >${op}/env; ls -l /proc/$$/fd >${op}/fds; cut -d" " -f1,5,6 /proc/$$/stat; pwd; echo oops >&2; exit 7`;
    const launch = superviseRun({ dir: op, cwd: '/tmp', graceMs: 100, stdin: false, argv: ['/bin/sh', '-c', script] }, { PATH: '/usr/bin:/bin', Q: "it's\nhere" });
    expect(await launch.exited).toEqual({ code: 0 });
    expect(JSON.parse(readFileSync(join(op, 'receipt'), 'utf8'))).toMatchObject({ status: 7 });
    const [stat, cwd] = readFileSync(join(op, 'stdout'), 'utf8').split('\n');
    expect(readFileSync(join(op, 'env'), 'utf8').split('\0').filter(Boolean).sort()).toEqual(['PATH=/usr/bin:/bin', 'PWD=/tmp', "Q=it's\nhere"].sort());
    const [pid, pgrp, session] = stat.split(' ').map(Number);
    expect([pgrp, session]).toEqual([pid, pid]); // the leader of its own session and group
    expect(JSON.parse(readFileSync(join(op, 'started'), 'utf8')).pid).toBe(pid);
    expect(cwd).toBe('/tmp');
    expect(readFileSync(join(op, 'stderr'), 'utf8')).toBe('oops\n');
    // The launcher's answer channel (its socket to the runtime, fd 7 of the request's subshell) is not the command's.
    expect(readFileSync(join(op, 'fds'), 'utf8')).not.toMatch(/socket:| 7 -> /);
    // It was the spare: its directory goes once it ends.
    await waitFor(() => !existsSync(spares[0]), { timeoutMs: 5_000, what: 'the used spare\'s directory to go' });
  });

  it('a spare that gets no request in its time, or an exit request, ends and takes its command process with it', async () => {
    for (const how of ['expires', 'told']) {
      const spare = join(dir, `spare-${how}`);
      mkdirSync(spare);
      const supervisor = fileURLToPath(new URL('../../../src/providers/supervisor.sh', import.meta.url));
      const shell = spawn('/bin/sh', ['-c', `_bsv_library=1; . "$1"; _bsv_spare_seconds=1; _bsv_spare "$2"`, 'sh', supervisor, spare], { stdio: 'ignore' });
      const ended = new Promise((r) => shell.on('exit', r));
      // Ready: its command process was started before it began to wait for a request.
      await waitFor(() => existsSync(join(spare, 'ready')), { what: `the ${how} spare to wait for a request` });
      const commandProcess = livePids().find((p) => cmdline(p).includes(`${spare}\0`));
      expect(commandProcess).toBeDefined();
      if (how === 'told') {
        const unspare = spawn('/bin/sh', ['-c', `_bsv_library=1; . "$1"; _bsv_unspare "$2"`, 'sh', supervisor, spare], { stdio: 'ignore' });
        await new Promise((r) => unspare.on('exit', r));
      }
      const started = Date.now();
      const code = await ended;
      expect(code).toBe(0);
      if (how === 'told') expect(Date.now() - started).toBeLessThan(900);
      await waitFor(() => !existsSync(`/proc/${commandProcess}`), { timeoutMs: 5_000, what: `the ${how} spare's command process to end` });
    }
  });
});
