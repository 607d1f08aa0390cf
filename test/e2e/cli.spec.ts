/**
 * The `berth` CLI over HTTP against a real `berth serve` child: exec (live output, stdin, exit code through; -it in
 * tmux: the pane's size inside, SIGWINCH resizes, Ctrl-D ends cat), logs [-f], ps, env/events [-f]/replay with --url,
 * and a clear message when no server answers. Needs tmux for -it: under CI=1 a missing tmux fails, else it skips.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, root } from '../integration/cli-process.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { finished, startServer, submit, tokens, type BerthServer } from './berth-server.ts';

const bin = join(root, 'bin/berth.js');
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
if (!hasTmux && process.env.CI === '1') throw new Error('CI=1 but tmux is missing: apt-get install -y tmux');
if (!hasTmux) console.log('skipped: berth exec -it in tmux (no tmux; apt-get install -y tmux)');

let server: BerthServer;
let envName: string;

beforeAll(async () => {
  server = await startServer();
  envName = `cli-${Date.now()}`;
  const created = await cli(['env', 'create', envName]);
  expect(created.code, created.stderr).toBe(0);
});
afterAll(() => server?.close());

const remoteEnv = (token = tokens.alice) => cleanEnv({ BERTH_URL: server.url, BERTH_TOKEN: token });

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** ms after start at which each stdout chunk arrived. */
  arrivals: { at: number; text: string }[];
}

/** Runs the CLI to its exit; `live` gets the run as it fills, for a test that acts on output while it runs. */
function cli(args: string[], options: { env?: NodeJS.ProcessEnv; input?: string; live?: (run: Run) => void } = {}): Promise<Run> {
  const started = Date.now();
  const child = spawn(process.execPath, [bin, ...args], { cwd: root, env: options.env ?? remoteEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  const run: Run = { code: null, stdout: '', stderr: '', arrivals: [] };
  options.live?.(run);
  child.stdout.on('data', (d: Buffer) => {
    run.stdout += d;
    run.arrivals.push({ at: Date.now() - started, text: d.toString() });
  });
  child.stderr.on('data', (d: Buffer) => (run.stderr += d));
  child.stdin.end(options.input ?? '');
  return once(child, 'exit').then(([code]) => ({ ...run, code: code as number | null }));
}

describe('berth exec', () => {
  it('streams output live and exits with the command code', async () => {
    const run = await cli(['exec', envName, '--', 'sh', '-c', 'echo first; sleep 2; echo second; echo oops >&2; exit 7']);
    expect(run.code, run.stderr).toBe(7);
    expect(run.stdout).toBe('first\nsecond\n');
    expect(run.stderr).toBe('oops\n');
    const first = run.arrivals.find((a) => a.text.includes('first'))!;
    const second = run.arrivals.find((a) => a.text.includes('second'))!;
    expect(second.at - first.at).toBeGreaterThan(1500); // printed as it happened, not at the end
  });

  it('forwards stdin with -i and ends it at EOF', async () => {
    const run = await cli(['exec', '-i', envName, '--', 'sh', '-c', 'tr a-z A-Z; echo done'], { input: 'hello\nworld\n' });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('HELLO\nWORLD\ndone\n');
  });

  it('passes a signal death through as 128+n and refuses an unknown environment', async () => {
    const killed = await cli(['exec', envName, '--', 'sh', '-c', 'kill -TERM $$']);
    expect(killed.code).toBe(143);
    const missing = await cli(['exec', 'no-such-env', '--', 'true']);
    expect(missing.code).toBe(125);
    expect(missing.stderr).toMatch(/^berth: No environment is named "no-such-env"\.\n$/);
  });

  it('keeps scopes: another tenant cannot find the environment', async () => {
    const run = await cli(['exec', envName, '--', 'true'], { env: remoteEnv(tokens.bob) });
    expect(run.code).toBe(125);
    expect(run.stderr).toMatch(/No environment is named/);
  });
});

describe.skipIf(!hasTmux)('berth exec -it in tmux', () => {
  it('sees the pane size, follows a resize, ends cat on Ctrl-D and passes the exit code through', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-tmux-'));
    const socket = join(dir, 'tmux.sock');
    const exitFile = join(dir, 'exit');
    const tmux = (...args: string[]) => {
      const r = spawnSync('tmux', ['-S', socket, ...args], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const pane = () => tmux('capture-pane', '-p', '-t', 'e2e');
    const until = async (what: string, ok: () => boolean) => {
      const deadline = Date.now() + 20_000;
      while (!ok()) {
        if (Date.now() > deadline) throw new Error(`tmux: no ${what}; pane:\n${pane()}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const command = [
      `env BERTH_URL=${server.url} BERTH_TOKEN=${tokens.alice}`,
      `${process.execPath} ${bin} exec -it ${envName} -- sh -c 'stty size; read go; stty size; cat; exit 3';`,
      `echo $? > ${exitFile}; sleep 60`,
    ].join(' ');
    try {
      tmux('new-session', '-d', '-s', 'e2e', '-x', '100', '-y', '30', command);
      await until('first stty size', () => /^30 100$/m.test(pane()));
      tmux('resize-window', '-t', 'e2e', '-x', '120', '-y', '40');
      await new Promise((resolve) => setTimeout(resolve, 500));
      tmux('send-keys', '-t', 'e2e', 'go', 'Enter');
      await until('stty size after the resize', () => /^40 120$/m.test(pane()));
      tmux('send-keys', '-t', 'e2e', 'echo me', 'Enter');
      await until('cat echoing the line', () => pane().split('\n').filter((l) => l === 'echo me').length === 2); // tty echo + cat
      tmux('send-keys', '-t', 'e2e', 'C-d');
      await until('the exit code', () => existsSync(exitFile) && readFileSync(exitFile, 'utf8').trim() !== '');
      expect(readFileSync(exitFile, 'utf8').trim()).toBe('3');
    } finally {
      spawnSync('tmux', ['-S', socket, 'kill-server']);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('berth logs and ps', () => {
  it('prints what an execution wrote, follows one that runs, and lists what is live', async () => {
    const env = (await server.json<{ id: string; slug: string }[]>('/v1/environments')).find((e) => e.slug === envName)!.id;
    const done = await submit(server, env, 'echo one; echo two >&2');
    await finished(server, done.id);
    const logs = await cli(['logs', done.id]);
    expect(logs).toMatchObject({ code: 0, stdout: 'one\n', stderr: `two\nberth: ${done.id} exited 0\n` });
    const byOperation = await cli(['logs', '--stream', 'stderr', done.operationId]);
    expect(byOperation).toMatchObject({ code: 0, stdout: '', stderr: `two\nberth: ${done.id} exited 0\n` });

    // Runs until the test cancels it (its TERM trap prints the end): ps and logs -f find it live however slowly the
    // CLI starts on a busy host (a 6 s sleep ended before two CLI starts at load 18).
    const live = await submit(server, env, `trap 'echo end; exit 0' TERM; echo start; sleep 600 & wait`);
    const ps = await cli(['ps']);
    expect(ps.code, ps.stderr).toBe(0);
    expect(ps.stdout).toMatch(/^ALLOCATION\s+ENVIRONMENT\s+GEN\s+STATE/m);
    expect(ps.stdout).toContain(envName);
    expect(ps.stdout).toMatch(new RegExp(`^${live.id}\\s+(accepted|running)\\s+${envName}`, 'm'));
    const psJson = (await cli(['ps', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(psJson.map((x) => x.kind)).toContain('allocation');
    expect(psJson.find((x) => x.kind === 'execution' && x.id === live.id)).toBeDefined();

    let following: Run | undefined;
    const followed = cli(['logs', '-f', live.id], { live: (run) => (following = run) });
    await waitFor(() => following?.stdout.includes('start'), { timeoutMs: 30_000, what: 'logs -f to print the live start' });
    expect((await server.call(`/v1/executions/${live.id}/cancel`, { method: 'POST' })).status).toBe(200);
    // logs -f ends with the execution and has printed exactly what it wrote: its start, then, when the TERM trap ran
    // within the cancel's grace (not under every load: CI saw 'start' alone once), its end.
    const ended = await followed;
    const saved = await cli(['logs', live.id]);
    expect(ended).toMatchObject({ code: 0, stdout: saved.stdout });
    expect(saved.stdout).toMatch(/^start\n(end\n)?$/);
    expect((await cli(['ps'], { env: remoteEnv(tokens.bob) })).stdout).not.toContain(envName);
  });
});

describe('berth env, events and replay with --url', () => {
  it('manage environments remotely in the token scope', async () => {
    const run = (...args: string[]) => cli(['env', ...args, '--url', server.url], { env: cleanEnv({ BERTH_TOKEN: tokens.bob }) });
    const created = await run('create', 'Bob Remote', '--json');
    expect(created.code, created.stderr).toBe(0);
    const env = JSON.parse(created.stdout);
    expect(env).toMatchObject({ object: 'environment', slug: 'bob-remote', profile: { provider: 'native' } });
    expect((await run('ls')).stdout).toMatch(new RegExp(`^${env.id}\\s+Bob Remote\\s+native\\s`, 'm'));
    const acquired = JSON.parse((await run('acquire', 'bob-remote', '--json')).stdout);
    expect(acquired).toMatchObject({ environmentId: env.id, state: 'ready' });
    const released = JSON.parse((await run('release', 'bob-remote', '--json')).stdout);
    expect(['releasing', 'released']).toContain(released.state);
    const removed = await run('rm', 'bob-remote');
    expect(removed.code, removed.stderr).toBe(0);
    expect((await run('ls')).stdout).not.toContain(env.id);
    const scoped = await run('ls', '--scope', 'alice');
    expect(scoped.code).toBe(2);
  });

  it('follow the audit feed and replay a stream over HTTP as JSON lines', async () => {
    const follower = spawn(process.execPath, [bin, 'events', '-f', '--json'], { cwd: root, env: remoteEnv(tokens.bob), stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: Record<string, any>[] = [];
    createInterface({ input: follower.stdout }).on('line', (line) => lines.push(JSON.parse(line)));
    try {
      const env = await server.json<{ id: string }>('/v1/environments', { body: { name: `feed ${Date.now()}` }, token: tokens.bob });
      const deadline = Date.now() + 20_000;
      while (!lines.some((l) => l.stream === `environment-${env.id}`)) {
        if (Date.now() > deadline) throw new Error(`no event of the new environment; got ${JSON.stringify(lines).slice(0, 500)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const event = lines.find((l) => l.stream === `environment-${env.id}`)!;
      expect(Object.keys(event).sort()).toEqual(['createdAt', 'data', 'id', 'metadata', 'position', 'revision', 'stream', 'type']);
      expect(typeof event.position).toBe('number');
      expect(lines.every((l) => !JSON.stringify(l).includes(envName))).toBe(true); // only bob's scope

      const replay = await cli(['replay', `environment-${env.id}`, '--json'], { env: remoteEnv(tokens.bob) });
      expect(replay.code, replay.stderr).toBe(0);
      const steps = replay.stdout.trim().split('\n').map((l) => JSON.parse(l));
      expect(steps[0]).toMatchObject({ stream: `environment-${env.id}`, revision: 0, stateBefore: expect.anything(), stateAfter: expect.anything() });
      const hidden = await cli(['replay', `environment-${env.id}`], { env: remoteEnv(tokens.alice) });
      expect(hidden.code).toBe(1);
      expect(hidden.stderr).toMatch(/No such stream/);
      const noFollow = await cli(['events'], { env: remoteEnv(tokens.bob) });
      expect(noFollow.code, noFollow.stderr).toBe(0);
      expect(noFollow.stdout).toContain(`environment-${env.id}@0 environment.created`);
    } finally {
      follower.kill('SIGINT');
      await once(follower, 'exit');
    }
  });
});

describe('no server', () => {
  it('says clearly that no server answers, for every remote command', async () => {
    const free = net.createServer().listen(0, '127.0.0.1');
    await once(free, 'listening');
    const port = (free.address() as net.AddressInfo).port;
    free.close();
    const env = cleanEnv({ BERTH_URL: `http://127.0.0.1:${port}`, BERTH_TOKEN: tokens.alice });
    // Side by side: each is a separate process that starts the CLI (seconds each on a busy host), none depends on another.
    const commands = [['ps'], ['exec', 'x', '--', 'true'], ['logs', 'x'], ['env', 'ls'], ['events', '-f'], ['replay', 'environment-x']];
    const runs = await Promise.all(commands.map((args) => cli(args, { env })));
    for (const [i, args] of commands.entries()) {
      const run = runs[i]!;
      expect(run.code, args.join(' ')).toBe(args[0] === 'exec' ? 125 : 1); // exec: Berth's side is 125
      expect(run.stderr, args.join(' ')).toMatch(new RegExp(`^berth: No Berth server answers at http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\): start one with \`berth serve\``));
    }
  });
});
