/**
 * The SQLite store's log is copied into the database file by the checkpointer's worker while the store stays open
 * and its commits never checkpoint (wal_autocheckpoint = 0 on the main connection): without the worker, the pages
 * appended here (under SQLite's 1000-page automatic threshold anyway) would stay in the log until the store closed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-sqlite-checkpoint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('checkpoints the log into the database file from its worker while the store is open, and reads stay whole', async () => {
  const file = join(dir, 'events.sqlite3');
  const store = SqliteEventStore.open(file);
  try {
    const emptyBytes = statSync(file).size;
    const blob = 'x'.repeat(4000);
    // About 2.4 MB in 30 commits: about 600 pages, under the automatic threshold.
    for (let commit = 0; commit < 30; commit++) {
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.append(`s-${i}`, [{ id: randomUUID(), type: 't.a', data: { blob } }], { expectedRevision: 'any' }),
        ),
      );
    }
    expect((store as unknown as { db: { pragma(p: string, o: object): unknown } }).db.pragma('wal_autocheckpoint', { simple: true })).toBe(0n);
    const size = await waitFor(() => statSync(file).size, { what: 'the database file to take the log', timeoutMs: 5000, until: (s) => s > 2_000_000 });
    expect(size).toBeGreaterThan(emptyBytes + 2_000_000);
    expect((await store.readAll()).length).toBe(600);
  } finally {
    await store.close();
  }
}, 20_000);

it('keeps the log bounded while one appender commits after another, faster than the worker copies', async () => {
  const file = join(dir, 'sequential.sqlite3');
  const store = SqliteEventStore.open(file);
  try {
    const data = { command: ['sh', '-c', 'echo hello'], digest: 'sha256:' + '0'.repeat(64) };
    // About 13,000 pages of log: 50 MiB had the log never been started over (it was, before: 200 MiB in 4 s).
    for (let i = 0; i < 3000; i++) {
      await store.append('one-after-another', [{ id: randomUUID(), type: 't.a', data }], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
    }
    // Started over whenever the worker reported 1,000 pages or more: at most a few thousand pages long.
    expect(statSync(`${file}-wal`).size).toBeLessThan(24 * 1024 * 1024);
    expect((await store.readAll()).length).toBe(3000);
  } finally {
    await store.close();
  }
}, 60_000);
