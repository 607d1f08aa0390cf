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
