/**
 * Edits through a turn's file tool hold a file twice in memory while they run (its bytes, and the bytes with the text
 * replaced): against a real `berth serve`, 24 edits of 64 MiB files sent at once would hold 3 GiB. The file tools
 * share one budget of whole-file bytes in memory (buffer-budget.ts): past it an edit waits its turn. The server grows
 * by about the budget, answers meanwhile, and every edit lands.
 */
import { closeSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, residentGrowth } from './stalled-client.ts';

const MiB = 1024 * 1024;
const EDITS = 24;
const SIZE = 64 * MiB;
/** 16 bytes at the end of file `i`: `word` is MARK before the edit, DONE after. */
const marker = (word: string, i: number) => `${word}-${String(i).padStart(4, '0')}-END--\n`;

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('edits through the file tools', () => {
  it(`share a memory budget: ${EDITS} edits of 64 MiB files at once`, { timeout: 240_000 }, async () => {
    const ws = await server.json('/v1/workspaces', { body: { name: 'edits' } });
    const root = path.join(server.dataDir, 'workspaces', ws.id, 'root');
    // A command's output: sparse files ending in a marker each.
    for (let i = 0; i < EDITS; i++) {
      const fd = openSync(path.join(root, `big-${i}.txt`), 'w', 0o644);
      ftruncateSync(fd, SIZE - 16);
      writeSync(fd, Buffer.from(marker('MARK', i)), 0, 16, SIZE - 16);
      closeSync(fd);
    }
    const session = await server.json('/v1/sessions', { body: { workspaceId: ws.id } });
    const turn = await server.json(`/v1/sessions/${session.id}/turns`, { body: {} });
    const edit = `/v1/sessions/${session.id}/turns/${turn.id}/files/edit`;

    let slowest = 0;
    let editing = true;
    const probe = (async () => {
      while (editing) {
        slowest = Math.max(slowest, await healthLatency(server.url, 20_000));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const { result: answers, grown, label } = await residentGrowth(
      server.process.child.pid!,
      async () => {
        try {
          return await Promise.all(
            Array.from({ length: EDITS }, (_, i) =>
              server.json<{ path: string; size: number }>(edit, { body: { path: `big-${i}.txt`, old: `MARK-${String(i).padStart(4, '0')}`, new: `DONE-${String(i).padStart(4, '0')}` } }),
            ),
          );
        } finally {
          editing = false;
          await probe;
        }
      },
      10,
    );
    answers.forEach((a, i) => expect(a).toMatchObject({ path: `big-${i}.txt`, size: SIZE }));
    expect(grown, label).toBeLessThan(640 * MiB);
    expect(slowest, '/healthz latency while the edits ran (ms)').toBeLessThan(2000);
    for (let i = 0; i < EDITS; i++) {
      const fd = openSync(path.join(root, `big-${i}.txt`), 'r');
      const tail = Buffer.alloc(16);
      readSync(fd, tail, 0, 16, SIZE - 16);
      closeSync(fd);
      expect(tail.toString()).toBe(marker('DONE', i));
    }
  });
});
