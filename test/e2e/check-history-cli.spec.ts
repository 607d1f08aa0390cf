/**
 * `berth check-history` as a child process over a real data directory: a log that today's machines fold as recorded
 * exits 0 with the count; one with an event a machine refuses exits 1 and names the event.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decisionEventId } from '../../src/actors/event-id.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { berth } from '../integration/cli-process.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-check-history-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('berth check-history', () => {
  it('exits 0 on a log that folds as recorded, and 1 naming an event today\'s machine refuses', async () => {
    const dataDir = join(dir, 'data');
    const env = await berth(['env', 'create', 'checked', '--data-dir', dataDir]);
    expect(env.code, env.stderr).toBe(0);
    const ok = await berth(['check-history', '--data-dir', dataDir]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^\d+ events of \d+ actor streams: all fold as recorded$/m);

    // An event the environment machine cannot take where it stands (a second creation), written behind the runtime's back.
    const store = SqliteEventStore.open(join(dataDir, 'events.sqlite3'));
    const [stream] = (await store.readAll({ maxCount: 100 })).map((e) => e.stream).filter((s) => s.startsWith('environment-'));
    const [created] = await store.readStream(stream, { maxCount: 1 });
    const revision = (await store.streamRevision(stream)) as bigint;
    await store.append(stream, [{ id: decisionEventId(stream, revision + 1n, { runtimeId: 'hand', epoch: 0 }, created.type, created.data), type: created.type, data: created.data, metadata: { ...created.metadata, from: 'idle', to: 'idle' } }], { expectedRevision: revision });
    await store.close();
    const bad = await berth(['check-history', '--data-dir', dataDir]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain(`${stream}@${revision + 1n} environment.created: refused:`);
    expect(bad.stdout).toMatch(/: 1 would not$/m);
  });
});
