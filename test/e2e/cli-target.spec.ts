/**
 * One default target for the CLI, driven as child processes: beside a `berth serve` that holds the data directory
 * (found through its serving record, with no BERTH_URL and no token in the environment) every command talks to that
 * server — env, events without --follow, replay, exec, ps — and `serve` prints the export lines another shell needs;
 * with the server gone (stopped, or killed and its record left behind) the same commands run in this process.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv, spawnBerth, type Running } from '../integration/cli-process.ts';

const scratch = mkdtempSync(join(tmpdir(), 'berth-target-'));
const dataDir = join(scratch, 'data');
// No BERTH_URL, no BERTH_TOKEN: only the data directory. A Docker engine that is not there: "missing engine" is Berth's side.
const beside = cleanEnv({ BERTH_DATA_DIR: dataDir, DOCKER_HOST: `unix://${join(scratch, 'no-docker.sock')}` });
let served: Running;
let url: string;

beforeAll(async () => {
  served = spawnBerth(['serve', '--port', '0'], { ...beside, BERTH_LOG_LEVEL: 'warn' });
  url = (await served.waitForLine(/^Berth listening on http:\/\//, 60_000)).replace('Berth listening on ', '');
  await served.waitForLine(/^ {2}export BERTH_TOKEN=/, 10_000);
}, 90_000);
afterAll(async () => {
  if (served.child.exitCode === null && served.child.signalCode === null) await served.stop('SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});

const admin = async (path: string) => {
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim();
  const response = await fetch(url + path, { headers: { authorization: `Bearer ${token}` } });
  expect(response.status, path).toBe(200);
  return response.json() as Promise<any>;
};

describe('beside a running server', () => {
  it('serve prints the export lines a shell needs: BERTH_URL and where the token is', () => {
    const at = served.lines.indexOf('For another shell:');
    expect(served.lines.slice(at + 1, at + 3)).toEqual([`  export BERTH_URL=${url}`, `  export BERTH_TOKEN="$(cat ${join(dataDir, 'token')})"`]);
  });

  it('env create writes into the server (its API sees it), and env ls names it under a header', async () => {
    const created = await berth(['env', 'create', 'beside-demo', '--description', 'made by the CLI'], beside);
    expect(created, created.stderr).toMatchObject({ code: 0 });
    const items = await admin('/v1/environments');
    expect(items.map((e: { name: string }) => e.name)).toContain('beside-demo');

    const listed = await berth(['env', 'ls'], beside);
    expect(listed.code, listed.stderr).toBe(0);
    const [header, ...rows] = listed.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ENVIRONMENT\s+NAME\s+PROVIDER\s+STATE\s+AVAILABILITY\s+ALLOCATION$/);
    expect(rows.some((r) => /^henv_\w+\s+beside-demo\s+native\s+idle\s+available\s+-$/.test(r))).toBe(true);
  }, 60_000);

  it('events without --follow reads the audit feed over HTTP to its newest event and exits 0 (BERTH_URL too)', async () => {
    for (const env of [beside, cleanEnv({ BERTH_URL: url, BERTH_DATA_DIR: dataDir })]) {
      const read = await berth(['events', '--prefix', 'environment-'], env);
      expect(read.code, read.stderr).toBe(0);
      expect(read.stdout).toMatch(/environment\.created \{"name":"beside-demo"/);
    }
    expect((await berth(['env', 'create', 'beside-two'], beside)).code).toBe(0);
    const positionsOf = (stdout: string) => stdout.split('\n').filter(Boolean).map((l) => BigInt(JSON.parse(l).position));
    const positions = positionsOf((await berth(['events', '--json'], beside)).stdout);
    expect(positions.length).toBeGreaterThan(1);
    const after = await berth(['events', '--json', '--after', String(positions[0])], beside);
    expect(positionsOf(after.stdout)).toEqual(positions.slice(1));
  }, 60_000);

  it('exec, ps and replay reach the same server, and exec runs there (not in this process)', async () => {
    const ran = await berth(['exec', 'beside-demo', '--', 'sh', '-c', 'echo from-server'], beside);
    expect(ran, ran.stderr).toMatchObject({ code: 0, stdout: 'from-server\n' });
    const items = await admin('/v1/executions');
    expect(items).toHaveLength(1);
    const replayed = await berth(['replay', items[0].id], beside);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toMatch(/^execution-hexe_\w+: \d+ events/);
    const ps = await berth(['ps', '-a'], beside);
    expect(ps.stdout).toContain(items[0].id);
  }, 60_000);

  it('a missing engine is Berth\'s side: exec exits 125 with one line', async () => {
    expect((await berth(['env', 'create', 'no-engine', '--provider', 'docker', '--image', 'berth-base:latest'], beside)).code).toBe(0);
    const ran = await berth(['exec', 'no-engine', '--', 'true'], beside);
    expect(ran.code, ran.stderr).toBe(125);
    expect(ran.stderr).toMatch(/^berth: .*Docker engine.*\n$/);
  }, 60_000);

  it('flags of a runtime in this process are refused while a server answers', async () => {
    const refused = await berth(['env', 'ls', '--scope', 'other'], beside);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`--scope is for a runtime in this process, but a server answers at ${url}`);
  });
});

describe('with the server gone', () => {
  it('runs in this process: after a clean stop (the record removed) and after a kill -9 (the record left, its pid dead)', async () => {
    expect(await served.stop('SIGTERM')).toBe(0);
    expect(existsSync(join(dataDir, 'serving.json'))).toBe(false);
    const local = await berth(['env', 'ls'], beside);
    expect(local.code, local.stderr).toBe(0);
    expect(local.stdout).toMatch(/beside-demo/);
    const events = await berth(['events', '--prefix', 'environment-'], beside);
    expect(events.stdout).toMatch(/environment\.created \{"name":"beside-demo"/);

    const again = spawnBerth(['serve', '--port', '0'], { ...beside, BERTH_LOG_LEVEL: 'warn' });
    await again.waitForLine(/^ {2}export BERTH_TOKEN=/, 60_000);
    expect(await again.stop('SIGKILL')).toBe(null);
    expect(existsSync(join(dataDir, 'serving.json'))).toBe(true);
    const afterKill = await berth(['env', 'create', 'after-kill'], beside);
    expect(afterKill.code, afterKill.stderr).toBe(0);
    const ran = await berth(['exec', 'after-kill', '--', 'sh', '-c', 'exit 3'], beside);
    expect(ran.code, ran.stderr).toBe(3);
  }, 120_000);
});
