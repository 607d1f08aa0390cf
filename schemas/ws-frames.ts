/**
 * The execution WebSocket's binary output frame (DESIGN §8): byte 0 = stream (1 stdout, 2 stderr, 3 pty), bytes 1–8
 * = unsigned 64-bit big-endian cursor of the first data byte, then the data. Pure codec, shared with the client.
 */
import { outputStreams, type OutputStream } from './output.ts';

export const OUTPUT_FRAME_HEADER_BYTES = 9;

export const streamCodes: Record<OutputStream, number> = { stdout: 1, stderr: 2, pty: 3 };
const streamByCode: Record<number, OutputStream> = Object.fromEntries(outputStreams.map((s) => [streamCodes[s], s]));

/** Close codes the server uses: 1000 after the final status, 1013 "try again later" (reconnect from your cursors). */
export const closeCodes = { complete: 1000, goingAway: 1001, tryAgainLater: 1013, internal: 1011 } as const;

export interface OutputFrame {
  stream: OutputStream;
  cursor: number;
  data: Buffer;
}

export function encodeOutputFrame(stream: OutputStream, cursor: number, data: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(OUTPUT_FRAME_HEADER_BYTES + data.length);
  writeOutputFrameHeader(frame, stream, cursor);
  frame.set(data, OUTPUT_FRAME_HEADER_BYTES);
  return frame;
}

/** Writes the header into the first `OUTPUT_FRAME_HEADER_BYTES` of `frame` (whose data already follows it). */
export function writeOutputFrameHeader(frame: Buffer, stream: OutputStream, cursor: number): Buffer {
  frame[0] = streamCodes[stream];
  frame.writeBigUInt64BE(BigInt(cursor), 1);
  return frame;
}

/** Decodes a frame; the data is a view into `frame`, not a copy. Throws on a malformed frame. */
export function decodeOutputFrame(frame: Buffer): OutputFrame {
  if (frame.length < OUTPUT_FRAME_HEADER_BYTES) throw new RangeError(`output frame of ${frame.length} bytes is too short`);
  const stream = streamByCode[frame[0]!];
  if (!stream) throw new RangeError(`output frame names unknown stream ${frame[0]}`);
  const cursor = frame.readBigUInt64BE(1);
  if (cursor > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError('output frame cursor is out of range');
  return { stream, cursor: Number(cursor), data: frame.subarray(OUTPUT_FRAME_HEADER_BYTES) };
}
