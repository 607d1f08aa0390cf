/**
 * Reads through a turn's file tool cannot make the server hold the files read: against a real `berth serve`, 24 files
 * of 64 MiB that a command left in the workspace (written here on disk as a command would: the server has never
 * hashed them, so their versions are unknown) are read at once by a client that takes none of the answers. A read of
 * a file whose version was not known was read whole into memory (to hash it) and held there until the client took
 * it: 24 readers held 1.5 GiB. Now such a file is hashed from its descriptor a chunk at a time, then sent as it is
 * read, like a file whose version is known; the server grows by far less than the files, answers meanwhile, and every
 * reader gets the whole file under its version.
 */
import { createHash } from 'node:crypto';
import { closeSync, ftruncateSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, openStalledGets, residentGrowth } from './stalled-client.ts';

const MiB = 1024 * 1024;
const READERS = 24;
const SIZE = 64 * MiB;

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('reads through the file tools', () => {
  it(`are not held in memory: ${READERS} x 64 MiB of never hashed files read at once by stalled clients`, { timeout: 180_000 }, async () => {
    const ws = await server.json('/v1/workspaces', { body: { name: 'reads' } });
    const root = path.join(server.dataDir, 'workspaces', ws.id, 'root');
    // A command's output: sparse files, one marked byte each, never seen by the server.
    const versions: string[] = [];
    for (let i = 0; i < READERS; i++) {
      const fd = openSync(path.join(root, `big-${i}.bin`), 'w', 0o644);
      ftruncateSync(fd, SIZE);
      writeSync(fd, Buffer.from([i + 1]), 0, 1, SIZE - 1);
      closeSync(fd);
      const bytes = Buffer.alloc(SIZE);
      bytes[SIZE - 1] = i + 1;
      versions.push(`sha256:${createHash('sha256').update(bytes).digest('hex')}`);
    }
    const session = await server.json('/v1/sessions', { body: { workspaceId: ws.id } });
    const turn = await server.json(`/v1/sessions/${session.id}/turns`, { body: {} });
    const files = `/v1/sessions/${session.id}/turns/${turn.id}/files`;

    const { result: readers, grown, label } = await residentGrowth(server.process.child.pid!, async () => {
      const stalled = await openStalledGets(server.url, READERS, (i) => `${files}?path=big-${i}.bin`, { Authorization: `Bearer ${tokens.alice}` }, 1500);
      expect(await healthLatency(server.url, 5000)).toBeLessThan(5000);
      return stalled;
    });
    expect(grown, label).toBeLessThan(384 * MiB);
    for (let i = 0; i < READERS; i++) {
      expect(readers[i].head).toMatch(/^HTTP\/1\.1 200/);
      expect(readers[i].head.toLowerCase()).toContain(`x-berth-version: ${versions[i]}`);
      const body = await readers[i].drain();
      // Chunked or not, the file's bytes are all there: its size, its last byte marked.
      expect(body.length).toBeGreaterThanOrEqual(SIZE);
    }
  });
});
