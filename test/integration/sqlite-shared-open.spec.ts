/**
 * Runtimes starting together on a fresh shared SQLite store (`sqlite:/absolute/file`), with real processes asking at
 * the same instants: every one opens it and writes. Before, switching the new file to WAL failed at once with
 * "database is locked" for one of them (CI met it: a contender of actor-contention.spec.ts exited 1 at open).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runRacers } from '../fixtures/racers.ts';

const base = mkdtempSync(join(tmpdir(), 'berth-shared-open-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('a fresh shared SQLite store', () => {
  it('is opened by four processes starting on it at the same instant, every round', async () => {
    for (let round = 0; round < 20; round++) mkdirSync(join(base, String(round)));
    const rounds = await runRacers('store-opener.ts', base, { rounds: 20, spacingMs: 150, count: 4 });
    expect(rounds.size).toBe(20);
    expect([...rounds].filter(([, said]) => said.some((s) => s !== 'opened'))).toEqual([]);
  });
});
