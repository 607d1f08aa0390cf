/**
 * File uploads through a turn's tools cannot make the server hold them: against a real `berth serve`, eight 48 MiB
 * bodies sent at once (each a chunked stream the client makes as it goes) are hashed and written as they arrive, so
 * the server's resident memory grows by a few buffers per upload, not by the 384 MiB sent (a body gathered whole, then
 * copied into one buffer, held each upload twice over). Every file lands whole with the version of its bytes, and the
 * server keeps answering meanwhile.
 */
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, residentGrowth } from './stalled-client.ts';

const MiB = 1024 * 1024;
const UPLOADS = 8;
const SIZE = 48 * MiB;

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

/** PUTs SIZE bytes (1 MiB pieces, each filled with `n`) as a chunked body, answering the server's reply and the bytes' version. */
function upload(files: string, n: number): Promise<{ status: number; body: any; version: string }> {
  const { hostname, port } = new URL(server.url);
  const piece = Buffer.alloc(MiB, n);
  const hash = createHash('sha256');
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method: 'PUT', path: `${files}?path=up-${n}.bin`, headers: { authorization: `Bearer ${tokens.alice}`, 'content-type': 'application/octet-stream' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()), version: `sha256:${hash.digest('hex')}` }));
    });
    req.on('error', reject);
    let sent = 0;
    const write = (): void => {
      while (sent < SIZE) {
        sent += MiB;
        hash.update(piece);
        if (!req.write(piece)) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  });
}

describe('uploads through the file tools', () => {
  it(`are not held in memory: ${UPLOADS} x 48 MiB at once grow the server by far less than they send`, { timeout: 180_000 }, async () => {
    const ws = await server.json('/v1/workspaces', { body: { name: 'uploads' } });
    const session = await server.json('/v1/sessions', { body: { workspaceId: ws.id } });
    const turn = await server.json(`/v1/sessions/${session.id}/turns`, { body: {} });
    const files = `/v1/sessions/${session.id}/turns/${turn.id}/files`;

    const { result: answers, grown, label } = await residentGrowth(server.process.child.pid!, async () => {
      const sending = Promise.all(Array.from({ length: UPLOADS }, (_, n) => upload(files, n + 1)));
      expect(await healthLatency(server.url, 5000)).toBeLessThan(5000);
      return sending;
    });
    for (const a of answers) expect(a).toMatchObject({ status: 200, body: { size: SIZE, version: a.version } });
    expect(grown, label).toBeLessThan(128 * MiB);
  });
});
