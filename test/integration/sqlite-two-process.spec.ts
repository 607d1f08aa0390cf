/**
 * Two real OS processes share one SQLite event store file and race on the same streams with optimistic concurrency,
 * while this process follows them with a live subscription: nothing is lost, duplicated or out of order.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = join(root, 'test/integration/fixtures/sqlite-appender.ts');
const dir = mkdtempSync(join(tmpdir(), 'berth-sqlite-two-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface WriterReport {
  writer: string;
  acked: string[];
  conflicts: number;
}

/** Starts a writer and resolves with it once it has opened the store; `report` resolves with its last line. */
async function startWriter(args: string[]): Promise<{ child: ChildProcess; report: Promise<WriterReport> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, ...args], { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.value !== 'ready') throw new Error(`writer did not start: ${String(first.value)}`);
  const report = (async () => {
    const line = await lines.next();
    const [code] = (await once(child, 'exit')) as [number | null];
    if (code !== 0) throw new Error(`writer exited with ${code}`);
    return JSON.parse(String(line.value)) as WriterReport;
  })();
  return { child, report };
}

describe('sqlite event store shared by two processes', () => {
  it('should keep every stream gap-free with exactly the acknowledged appends, followed live by a third process', async () => {
    const file = join(dir, 'events.sqlite3');
    const streams = 3;
    const appendsPerWriter = 150;
    const observer = SqliteEventStore.open(file, { pollIntervalMs: 10 });
    try {
      const writers = await Promise.all(
        ['w1', 'w2'].map((w) => startWriter([file, w, String(streams), String(appendsPerWriter), '2', '10'])),
      );
      const total = 2 * appendsPerWriter;
      // Follows the writers live, while they run: only the poll of the shared file can wake it.
      const following = (async () => {
        const seen: RecordedEvent[] = [];
        for await (const e of observer.subscribeToAll({ filter: { streamPrefixes: ['shared-'] } })) {
          seen.push(e);
          if (seen.length === total) break;
        }
        return seen;
      })();
      for (const w of writers) w.child.stdin!.end('go\n');
      const reports = await Promise.all(writers.map((w) => w.report));

      const acked = reports.flatMap((r) => r.acked);
      expect(acked).toHaveLength(total);
      // The race was real: writers lost optimistic-concurrency checks and retried.
      expect(reports.reduce((n, r) => n + r.conflicts, 0)).toBeGreaterThan(0);

      const stored: RecordedEvent[] = [];
      for (let s = 0; s < streams; s++) {
        const events = await observer.readStream(`shared-${s}`);
        expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => BigInt(i)));
        stored.push(...events);
      }
      expect(stored).toHaveLength(acked.length);
      expect(new Set(stored.map((e) => e.id))).toEqual(new Set(acked));

      const seen = await following;
      const all = await observer.readAll();
      expect(seen.map((e) => e.id)).toEqual(all.map((e) => e.id));
      for (let i = 1; i < seen.length; i++) expect(seen[i].position).toBeGreaterThan(seen[i - 1].position);
      // And the two processes really interleaved their commits rather than running one after the other.
      const writerOf = seen.map((e) => (e.data as { writer: string }).writer);
      expect(writerOf.filter((w, i) => i > 0 && w !== writerOf[i - 1]).length).toBeGreaterThan(2);
    } finally {
      await observer.close();
    }
  }, 30_000);
});
