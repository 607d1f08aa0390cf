/**
 * `berth serve` as a real process: it prints its URL once ready, answers /healthz, stops cleanly on SIGTERM, keeps
 * its runtimeId across restarts while the epoch goes up, and keeps the generated admin token private.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { berth, cleanEnv, spawnBerth, type Running } from './cli-process.ts';

let dir: string;
const running: Running[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-cli-serve-'));
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function serve(env = cleanEnv()) {
  const r = spawnBerth(['serve', '--data-dir', dir, '--port', '0'], env);
  running.push(r);
  const line = await r.waitForLine(/^Berth listening on http:\/\//);
  const url = line.replace('Berth listening on ', '');
  const health = await (await fetch(`${url}/healthz`)).json();
  return { r, url, health };
}

describe('berth serve', () => {
  it('should answer /healthz once it prints its URL, and fence a higher epoch with the same runtimeId after a restart', async () => {
    const first = await serve();
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(first.url).not.toMatch(/:0$/);
    expect(first.health).toEqual({ status: 'ok', runtimeId: expect.stringMatching(/^rt_/), epoch: 1, store: 'sqlite', failedProjections: [] });
    expect(await first.r.stop('SIGTERM')).toBe(0);
    expect(first.r.stderr()).toContain('runtime stopped');

    const second = await serve();
    expect(second.health).toMatchObject({ status: 'ok', runtimeId: first.health.runtimeId, epoch: 2 });
    expect(await second.r.stop('SIGINT')).toBe(0);
  });

  it('should generate the admin token once, print it once, and keep it readable by its owner only', async () => {
    const first = await serve();
    await first.r.stop();
    const tokenFile = join(dir, 'token');
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const token = readFileSync(tokenFile, 'utf8').trim();
    expect(token.length).toBeGreaterThanOrEqual(16);
    expect(first.r.lines.filter((l) => l.includes(token))).toHaveLength(1);
    expect(first.r.stderr()).not.toContain(token);

    const second = await serve();
    await second.r.stop();
    expect(second.r.lines.join('\n')).not.toContain(token);
    expect(readFileSync(tokenFile, 'utf8').trim()).toBe(token);
  });

  it('should use BERTH_TOKEN without writing or printing a token', async () => {
    const token = 'a-test-token-that-is-long-enough';
    const { r } = await serve(cleanEnv({ BERTH_TOKEN: token }));
    await r.stop();
    expect(existsSync(join(dir, 'token'))).toBe(false);
    expect(r.lines.join('\n')).not.toContain(token);
    expect(r.stderr()).not.toContain(token);
  });

  it('should refuse a bad configuration with a message naming the setting', async () => {
    const bad = await berth(['serve', '--data-dir', dir, '--port', '99999']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/invalid configuration: --port \/ BERTH_PORT/);
    const store = await berth(['serve', '--data-dir', dir], cleanEnv({ BERTH_EVENTSTORE_URL: 'mysql://x' }));
    expect(store.code).toBe(1);
    expect(store.stderr).toMatch(/--store \/ BERTH_EVENTSTORE_URL: must be "sqlite", "sqlite:\/absolute\/path" or an esdb/);
    const usage = await berth(['serve', '--bogus']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/usage: berth serve/);
  });
});
