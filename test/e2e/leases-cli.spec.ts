/**
 * The `berth lease` CLI against a real `berth serve` child: bind, ls by work, get, acquire twice (the same machine),
 * pause with --retry-in, hold, resume, release, the --json answers, and the refusals made before anything is sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;

const cli = (...args: string[]) => berth(args, cleanEnv({ BERTH_URL: server.url, BERTH_TOKEN: tokens.alice }));

async function ok(...args: string[]): Promise<string> {
  const run = await cli(...args);
  expect(run.code, `berth ${args.join(' ')}: ${run.stderr}`).toBe(0);
  return run.stdout.trim();
}

beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('berth lease', () => {
  it('binds, lists by work, acquires one machine, pauses, holds, resumes and releases', async () => {
    const bound = JSON.parse(await ok('lease', 'bind', 'cli-lease', '--work', 'workflow:w-cli', '--profile-json', '{"provider":"native"}', '--idle', '120', '--json'));
    expect(bound).toMatchObject({ key: 'cli-lease', work: { kind: 'workflow', id: 'w-cli' }, state: 'running', machine: null, idleSeconds: 120 });
    await ok('lease', 'bind', 'cli-other', '--work', 'workflow:w-other', '--profile-json', '{"provider":"native"}');
    expect(await ok('lease', 'ls', '--work-kind', 'workflow', '--work-id', 'w-cli')).toMatch(/^KEY\s+WORK.*\ncli-lease\s+workflow:w-cli\s+running\s+-\s+-$/);

    const first = JSON.parse(await ok('lease', 'acquire', 'cli-lease', '--json'));
    expect(first.reused).toBe(false);
    expect(await ok('lease', 'acquire', 'cli-lease')).toBe(`${first.target.environmentId}  ${first.target.allocationId}  generation 1  reused`);

    const before = Date.now();
    const paused = JSON.parse(await ok('lease', 'pause', 'cli-lease', '--cause', 'rate_limited', '--retry-in', '600', '--json'));
    expect(paused).toMatchObject({ state: 'paused', pause: { cause: { kind: 'rate_limited' }, attempt: 1 } });
    expect(paused.pause.retryAt).toBeGreaterThanOrEqual(before + 600_000);
    expect(await ok('lease', 'hold', 'cli-lease')).toMatch(/^cli-lease {2}workflow:w-cli {2}held {2}machine \S+ \(generation 1\) {2}pause held \(rate_limited, attempt 1\)$/);
    expect(await ok('lease', 'get', 'cli-lease')).toContain('  held  ');
    expect(await ok('lease', 'resume', 'cli-lease')).toContain('  running  ');
    expect(await ok('lease', 'release', 'cli-lease')).toMatch(/ {2}released {2}/);
  }, 60_000);

  it('refuses malformed flags before sending anything, and names server refusals', async () => {
    for (const args of [
      ['lease', 'bind', 'k', '--work', 'no-colon', '--profile-json', '{}'],
      ['lease', 'bind', 'k', '--work', 'a:b', '--profile-json', '{nope'],
      ['lease', 'pause', 'k'],
      ['lease', 'pause', 'k', '--cause', 'x', '--retry-at', 'yesterday'],
      ['lease', 'pause', 'k', '--cause', 'x', '--retry-at', '2030-01-01T00:00:00Z', '--retry-in', '5'],
      ['lease', 'acquire', 'k', '--cause', 'x'],
    ]) {
      const run = await cli(...args);
      expect(run.code, args.join(' ')).toBe(2);
    }
    const missing = await cli('lease', 'get', 'never-bound');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/not_found|No such lease/);
  });
});
