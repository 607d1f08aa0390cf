/**
 * The runtime id and the generated admin token kept in a data directory, when several starters make them at the same
 * instant (real processes): every starter ends with the same values, and they are what the files hold. Before, the
 * file was created empty and then written; a second starter read it empty in between and wrote its own over it, so
 * the first served with a runtime id and a token the directory no longer held.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runRacers } from '../fixtures/racers.ts';

const base = mkdtempSync(join(tmpdir(), 'berth-kept-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('identities kept in a data directory', () => {
  it('are the same for four starters making them at the same instant, and are what the files hold', async () => {
    const rounds = await runRacers('config-racer.ts', base, { rounds: 20, spacingMs: 100, count: 4 });
    expect(rounds.size).toBe(20);
    for (const [round, seen] of rounds) {
      const kept = `${readFileSync(join(base, round, 'runtime-id'), 'utf8').trim()} ${readFileSync(join(base, round, 'token'), 'utf8').trim()}`;
      expect(seen, `round ${round}`).toEqual([kept, kept, kept, kept]);
    }
  });
});
