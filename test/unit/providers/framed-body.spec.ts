/**
 * The file calls' framing (schemas/framed-body.ts): a head split over any chunking is read whole, the bytes after it
 * come back exactly, and a head over its bound or cut short is refused with its typed error.
 */
import { describe, expect, it } from 'vitest';
import { frameHead, readFramed } from '../../../schemas/framed-body.ts';

async function* chunked(bytes: Buffer, size: number): AsyncIterable<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function all(rest: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of rest) parts.push(part);
  return Buffer.concat(parts);
}

describe('framed bodies', () => {
  const head = { target: 'x', entries: Array.from({ length: 2000 }, (_, i) => ({ path: `f${i}`, size: i })) };
  const tail = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
  const body = Buffer.concat([frameHead(head), tail]);

  it.each([1, 3, 4, 5, 4096, body.length])('should read the head and the exact bytes after it, in chunks of %i', async (size) => {
    const framed = await readFramed(chunked(body, size), 1 << 20);
    expect(framed.head).toEqual(head);
    expect((await all(framed.rest)).equals(tail)).toBe(true);
  });

  it('should refuse a head over its bound before reading it', async () => {
    await expect(readFramed(chunked(body, 7), 1000)).rejects.toMatchObject({ code: 'body_too_large', detail: { max_bytes: 1000 } });
  });

  it('should refuse a body cut inside its head, and a head that is not JSON', async () => {
    await expect(readFramed(chunked(body.subarray(0, 100), 10), 1 << 20)).rejects.toMatchObject({ code: 'invalid_request', detail: { reason: 'truncated_head' } });
    const notJson = Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from('{x}')]);
    await expect(readFramed(chunked(notJson, 2), 1 << 20)).rejects.toMatchObject({ code: 'invalid_request', detail: { reason: 'bad_head' } });
  });
});
