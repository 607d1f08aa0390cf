/**
 * The framing of the Execution Host's file calls (schemas/host-protocol.ts): a JSON head and then raw bytes in one
 * HTTP body, `[u32 big-endian length][head JSON][bytes]`, so a manifest and the blobs it names travel in one stream
 * without base64 or a body held whole in memory. Both sides read and write it here.
 */
import { BerthError } from './errors.ts';

/** The length prefix and the head, ready to be written before the bytes. */
export function frameHead(head: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(head));
  const prefix = Buffer.allocUnsafe(4);
  prefix.writeUInt32BE(json.length);
  return Buffer.concat([prefix, json]);
}

/** Reads the head of a framed body (at most `maxHead` bytes of JSON); `rest` yields the bytes after it. */
export async function readFramed(body: AsyncIterable<Buffer>, maxHead: number): Promise<{ head: unknown; rest: AsyncIterable<Buffer> }> {
  const chunks = body[Symbol.asyncIterator]();
  // Chunks are kept as they come and joined once the head is whole (joining at each chunk would copy a large
  // manifest quadratically).
  const parts: Buffer[] = [];
  let size = 0;
  let length: number | undefined;
  while (length === undefined || size < 4 + length) {
    const next = await chunks.next();
    if (next.done) throw new BerthError('invalid_request', 'The framed body ends before its head does.', { reason: 'truncated_head' });
    parts.push(next.value);
    size += next.value.length;
    if (length === undefined && size >= 4) {
      length = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).readUInt32BE(0);
      if (length > maxHead) throw new BerthError('body_too_large', 'The framed body\'s head is too large.', { max_bytes: maxHead });
    }
  }
  const held = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
  let head: unknown;
  try {
    head = JSON.parse(held.subarray(4, 4 + length).toString('utf8'));
  } catch {
    throw new BerthError('invalid_request', 'The framed body\'s head is not JSON.', { reason: 'bad_head' });
  }
  const after = held.subarray(4 + length);
  async function* rest(): AsyncIterable<Buffer> {
    if (after.length > 0) yield after;
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) yield next.value;
  }
  return { head, rest: rest() };
}
