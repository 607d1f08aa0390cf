/**
 * What `berth exec`, `ps` and `logs` promise, driven as child processes against a real `berth serve`: exit codes
 * whatever the sandbox (127/126 for the command, native and Docker, with and without a content version; 125 for
 * Berth's side; 124 for
 * a timeout, with `timedOut` on the record), a real detach (--detach, or Ctrl-C twice: the command keeps running and
 * its id and the `berth logs -f` line are printed; in a tmux terminal too), `ps` with names and headers and `ps -a`,
 * `logs --tail N` and the exit status at the end of a finished execution's logs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv, root } from '../integration/cli-process.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable } from '../integration/docker-env.ts';
import { finished, startServer, tokens, type BerthServer } from './berth-server.ts';

const bin = join(root, 'bin/berth.js');
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
if (!hasTmux && process.env.CI === '1') throw new Error('CI=1 but tmux is missing: apt-get install -y tmux');

let server: BerthServer;
let remote: NodeJS.ProcessEnv;
const envName = `behaviour-${Date.now()}`;
const scratch = mkdtempSync(join(tmpdir(), 'berth-behaviour-'));

beforeAll(async () => {
  server = await startServer();
  remote = cleanEnv({ BERTH_URL: server.url, BERTH_TOKEN: tokens.alice });
  const created = await berth(['env', 'create', envName], remote);
  expect(created.code, created.stderr).toBe(0);
}, 120_000);
afterAll(async () => {
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const exec = (args: string[]) => berth(['exec', ...args], remote);
const record = (id: string) => server.json<Record<string, any>>(`/v1/executions/${id}`, { token: tokens.alice });
const executionIdOf = (text: string) => /hexe_[0-9a-f]{32}/.exec(text)?.[0];

describe('exit codes', () => {
  /** 127 and 126 in `env`, then again once it has a built content version. */
  async function notFoundAndNotExecutable(env: string) {
    const codes = async () => [(await exec([env, '--', 'no-such-command'])).code, (await exec([env, '--', '/tmp'])).code];
    expect(await codes()).toEqual([127, 126]);
    const source = join(scratch, `source-${env}`);
    mkdirSync(source, { recursive: true });
    writeFileSync(join(source, 'hello.txt'), 'hello\n');
    expect((await berth(['env', 'push', env, source], remote)).code).toBe(0);
    const built = await berth(['env', 'build', env, '--follow'], remote);
    expect(built.stdout, built.stderr).toMatch(/version 1 ready/);
    expect(await codes()).toEqual([127, 126]);
  }

  it('127 for a command not found and 126 for one not executable, before and after the environment has a content version', async () => {
    await notFoundAndNotExecutable(envName);
  }, 180_000);

  it.skipIf(!dockerAvailable)('the same in a Docker environment', async () => {
    const created = await berth(['env', 'create', `${envName}-docker`, '--provider', 'docker', '--image', 'berth-base:latest'], remote);
    expect(created.code, created.stderr).toBe(0);
    await notFoundAndNotExecutable(`${envName}-docker`);
    // The container, network and volume go with it (the server's cleanup knows only the environments it made).
    const removed = await berth(['env', 'rm', `${envName}-docker`], remote);
    expect(removed.code, removed.stderr).toBe(0);
  }, 240_000);

  it('125 for Berth\'s side: an environment that does not exist', async () => {
    const run = await exec(['no-such-environment', '--', 'true']);
    expect(run).toEqual({ code: 125, stdout: '', stderr: 'berth: No environment is named "no-such-environment".\n' });
  }, 60_000);

  it('124 for a timeout, and the record says timedOut (not only an event)', async () => {
    const run = await exec(['--timeout', '300', '--operation-id', 'behaviour-timeout', envName, '--', 'sleep', '30']);
    expect(run.code, run.stderr).toBe(124);
    expect(run.stderr).toContain('berth: the command timed out');
    const [listed] = await server.json<Record<string, any>[]>('/v1/executions?operationId=behaviour-timeout', { token: tokens.alice });
    expect(listed).toMatchObject({ timedOut: true });
    expect(await record(listed!.id)).toMatchObject({ timedOut: true });
  }, 60_000);
});

describe('detach', () => {
  it('--detach prints the id and the logs -f line at once, and the command runs on to its end', async () => {
    const run = await exec(['--detach', envName, '--', 'sh', '-c', 'sleep 2; echo finished-alone']);
    expect(run.code, run.stderr).toBe(0);
    const id = run.stdout.trim();
    expect(id).toMatch(/^hexe_[0-9a-f]{32}$/);
    expect(run.stderr).toBe(`${id} keeps running; follow it with: berth logs -f ${id}\n`);
    expect(await finished(server, id)).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await berth(['logs', id], remote)).stdout).toBe('finished-alone\n');
  }, 60_000);

  it('Ctrl-C twice detaches without cancelling; once cancels (130)', async () => {
    const started = async (command: string) => {
      const child = spawn(process.execPath, [bin, 'exec', envName, '--', 'sh', '-c', command], { cwd: root, env: remote, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = once(child, 'exit') as Promise<[number | null]>;
      await once(child.stdout, 'data'); // the command runs: its first line arrived
      return { child, exited, stderr: () => stderr };
    };
    const twice = await started('echo up; sleep 3; echo survived');
    // Two presses, as at a terminal: signals sent back to back can merge into one pending SIGINT.
    twice.child.kill('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 200));
    twice.child.kill('SIGINT');
    const [detachedCode] = await twice.exited;
    const id = executionIdOf(twice.stderr())!;
    expect(detachedCode, twice.stderr()).toBe(0);
    expect(twice.stderr()).toContain(`berth: detached; ${id} keeps running; follow it with: berth logs -f ${id}`);
    expect(await finished(server, id)).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await berth(['logs', id], remote)).stdout).toBe('up\nsurvived\n');

    const once_ = await started('echo up; sleep 30');
    once_.child.kill('SIGINT');
    const [cancelledCode] = await once_.exited;
    expect(cancelledCode, once_.stderr()).toBe(130);
  }, 90_000);

  it.skipIf(!hasTmux)('Ctrl-C twice at a terminal (tmux) detaches and prints the logs -f line', async () => {
    const socket = join(scratch, 'tmux.sock');
    const tmux = (...args: string[]) => spawnSync('tmux', ['-S', socket, ...args], { encoding: 'utf8' });
    const pane = () => tmux('capture-pane', '-p', '-J', '-t', 'detach').stdout;
    const until = (what: string, ok: (text: string) => boolean) =>
      waitFor(async () => pane(), { until: ok, timeoutMs: 30_000, what });
    const command = `env BERTH_URL=${server.url} BERTH_TOKEN=${tokens.alice} ${process.execPath} ${bin} exec ${envName} -- sh -c 'echo up; sleep 4; echo survived'; echo "exit=$?"; sleep 60`;
    try {
      expect(tmux('new-session', '-d', '-s', 'detach', '-x', '200', '-y', '30', command).status).toBe(0);
      await until('the command running', (text) => /^up$/m.test(text));
      // The second press once the first was read, as a person would: two keys sent back to back can reach the
      // process as one pending SIGINT (it then only cancels), which failed CI once.
      tmux('send-keys', '-t', 'detach', 'C-c');
      await until('the first Ctrl-C read', (text) => text.includes('berth: cancelling'));
      tmux('send-keys', '-t', 'detach', 'C-c');
      const text = await until('the detach', (t) => /exit=\d+/.test(t));
      expect(text).toMatch(/^exit=0$/m);
      const id = executionIdOf(text)!;
      expect(text).toContain(`follow it with: berth logs -f ${id}`);
      expect(await finished(server, id)).toMatchObject({ status: 'exited', exitCode: 0 });
    } finally {
      tmux('kill-server');
    }
  }, 90_000);
});

describe('ps and logs', () => {
  it('ps names environments under headers, shows running executions by default and finished ones with -a', async () => {
    const done = await exec(['--operation-id', 'behaviour-ps-done', envName, '--', 'sh', '-c', 'exit 3']);
    expect(done.code).toBe(3);
    const live = await exec(['--detach', envName, '--', 'sleep', '30']);
    const liveId = live.stdout.trim();
    const [doneRecord] = await server.json<{ id: string }[]>('/v1/executions?operationId=behaviour-ps-done', { token: tokens.alice });
    try {
      const ps = await berth(['ps'], remote);
      expect(ps.code, ps.stderr).toBe(0);
      expect(ps.stdout).toMatch(/^ALLOCATION\s+ENVIRONMENT\s+GEN\s+STATE\s+PROVIDER\s+USES$/m);
      expect(ps.stdout).toMatch(/^EXECUTION\s+STATUS\s+ENVIRONMENT\s+AGE\s+COMMAND$/m);
      expect(ps.stdout).toMatch(new RegExp(`^${liveId}\\s+running\\s+${envName}\\s+\\S+\\s+sleep 30$`, 'm'));
      expect(ps.stdout).not.toContain(doneRecord!.id);
      const all = await berth(['ps', '-a'], remote);
      expect(all.stdout).toMatch(new RegExp(`^${doneRecord!.id}\\s+exited 3\\s+${envName}\\s`, 'm'));
      expect(all.stdout).toContain(liveId);
    } finally {
      await server.call(`/v1/executions/${liveId}/cancel`, { method: 'POST', token: tokens.alice });
    }
  }, 90_000);

  it('logs --tail N prints the last N lines of each stream, and a finished execution ends with its exit status', async () => {
    const run = await exec(['--operation-id', 'behaviour-tail', envName, '--', 'sh', '-c', 'for i in 1 2 3 4 5; do echo out$i; done; echo err1 >&2; echo err2 >&2; exit 4']);
    expect(run.code).toBe(4);
    const tail = await berth(['logs', '--tail', '2', 'behaviour-tail'], remote);
    const [listed] = await server.json<{ id: string }[]>('/v1/executions?operationId=behaviour-tail', { token: tokens.alice });
    expect(tail).toEqual({ code: 0, stdout: 'out4\nout5\n', stderr: `err1\nerr2\nberth: ${listed!.id} exited 4\n` });
    const one = await berth(['logs', '-n', '1', '--stream', 'stdout', listed!.id], remote);
    expect(one.stdout).toBe('out5\n');
    const followed = await berth(['logs', '-f', '--tail', '1', listed!.id], remote);
    expect(followed).toEqual({ code: 0, stdout: 'out5\n', stderr: `err2\nberth: ${listed!.id} exited 4\n` });
  }, 60_000);
});
