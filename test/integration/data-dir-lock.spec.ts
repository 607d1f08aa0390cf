/**
 * One runtime per data directory, with real processes: a second holder is refused (in this process and in another),
 * a holder killed with SIGKILL leaves nothing that blocks the next start, and starters racing over a killed holder's
 * directory never both win (the old stale-file takeover let the second starter delete the first's new lock), and two
 * asking for a free directory at the same instant never both lose.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DataDirLock } from '../../src/store/data-dir-lock.ts';
import { runRacers } from '../fixtures/racers.ts';
import { berth, cleanEnv, hasExited, root, spawnBerth } from './cli-process.ts';

const holder = join(root, 'test/fixtures/lock-holder.ts');
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-lock-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts a lock-holder child; resolves with it once it said won or lost. */
async function contender(dataDir: string, holdMs?: number) {
  // Through node itself (not the tsx wrapper), so the pid killed is the pid holding the lock.
  const child = spawn(process.execPath, ['--import', 'tsx', holder, dataDir, ...(holdMs === undefined ? [] : [String(holdMs)])], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await new Promise<void>((resolve) => {
    const check = () => (/^(won|lost)/.test(out) ? resolve() : undefined);
    child.stdout.on('data', check);
    child.on('exit', () => resolve());
  });
  return { child, said: out.trim() };
}

describe('the data-directory lock', () => {
  it('refuses a second holder in this process and in another, and is free again once released', async () => {
    const dataDir = join(dir, 'one');
    const lock = await DataDirLock.acquire(dataDir);
    await expect(DataDirLock.acquire(dataDir)).rejects.toMatchObject({ code: 'unavailable', detail: { pid: process.pid } });
    const other = await contender(dataDir, 0);
    expect(other.said).toMatch(new RegExp(`^lost .*in use by another Berth runtime \\(pid ${process.pid}\\)`));
    await lock.release();
    const again = await DataDirLock.acquire(dataDir);
    await again.release();
  });

  it('is taken over at once after its holder is killed with SIGKILL', async () => {
    const dataDir = join(dir, 'killed');
    const first = await contender(dataDir);
    expect(first.said).toBe('won');
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    const lock = await DataDirLock.acquire(dataDir);
    await lock.release();
  });

  it('gives a killed holder\'s directory to exactly one of many racing starters, every round', async () => {
    for (let round = 0; round < 5; round++) {
      const dataDir = join(dir, `race-${round}`);
      const dead = await contender(dataDir);
      dead.child.kill('SIGKILL');
      await once(dead.child, 'exit');
      // Four starters at once over the dead holder's lock; winners hold for 1.5 s so every loser meets a live winner.
      const racers = await Promise.all([0, 1, 2, 3].map(() => contender(dataDir, 1500)));
      expect(racers.filter((r) => r.said === 'won'), `round ${round}: ${racers.map((r) => r.said).join(' | ')}`).toHaveLength(1);
      await Promise.all(racers.map((r) => (r.child.exitCode === null ? once(r.child, 'exit') : undefined)));
    }
  });

  it('gives a free directory to exactly one of two starters asking at the same instant, every round', async () => {
    // Before, SQLite refused both in about one such round in six (each held the shared lock the other needed).
    const base = join(dir, 'instant');
    for (let round = 0; round < 30; round++) mkdirSync(join(base, String(round)), { recursive: true });
    // A winner holds its round's lock for 480 ms, past the 250 ms a refused starter tries again for.
    const rounds = await runRacers('lock-racer.ts', base, { rounds: 30, spacingMs: 500, count: 2 });
    expect(rounds.size).toBe(30);
    expect([...rounds].filter(([, said]) => said.join() !== 'lost,won')).toEqual([]);
  });

  it('lets exactly one of two `berth serve` started at the same instant on one data directory serve', async () => {
    const dataDir = join(dir, 'serve');
    const env = cleanEnv({ BERTH_TOKEN: 'lock-spec-admin-token-0123456789' });
    const [a, b] = [spawnBerth(['serve', '--data-dir', dataDir, '--port', '0'], env), spawnBerth(['serve', '--data-dir', dataDir, '--port', '0'], env)];
    // Stopped whatever the assertions say, so a failing run leaves no server behind.
    onTestFinished(() => Promise.all([a.stop('SIGKILL'), b.stop('SIGKILL')]).then(() => undefined));
    const outcome = (r: typeof a) => r.waitForLine(/^Berth listening on /, 60_000).then(() => 'serves', () => 'refused');
    const results = await Promise.all([outcome(a), outcome(b)]);
    expect([...results].sort()).toEqual(['refused', 'serves']);
    const loser = results[0] === 'serves' ? b : a;
    expect(loser.stderr().split('\n').filter((l) => !l.startsWith('{')).join('\n')).toMatch(/in use by another Berth runtime/);
  });

  it('refuses a second `berth host` on one data directory, naming the first, and leaves the first serving', async () => {
    const dataDir = join(dir, 'host');
    const credential = join(dir, 'host-credential');
    writeFileSync(credential, 'lock-spec-host-credential-0123456789abcdef\n', { mode: 0o600 });
    const args = (socket: string) => ['host', '--data-dir', dataDir, '--credential', credential, '--socket', join(dir, socket)];
    const first = spawnBerth(args('first.sock'), cleanEnv());
    onTestFinished(() => first.stop('SIGKILL').then(() => undefined));
    await first.waitForLine(/^Berth host listening on /, 60_000);
    const second = await berth(args('second.sock'));
    expect(second.code).not.toBe(0);
    expect(second.stderr).toMatch(new RegExp(`in use by another Berth process \\(pid ${first.child.pid}\\); stop it first, or give this host its own --data-dir`));
    expect(hasExited(first.child)).toBe(false);
  });
});
