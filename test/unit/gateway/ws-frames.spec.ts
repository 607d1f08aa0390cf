import { describe, expect, it } from 'vitest';
import { decodeOutputFrame, encodeOutputFrame, OUTPUT_FRAME_HEADER_BYTES } from '../../../schemas/ws-frames.ts';

describe('WebSocket output frames', () => {
  it('should lay out stream byte, u64 big-endian cursor of the first data byte, then the data', () => {
    const frame = encodeOutputFrame('stderr', 0x0102030405, Buffer.from('hi'));
    expect([...frame]).toEqual([2, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x68, 0x69]);
    expect(encodeOutputFrame('stdout', 0, Buffer.alloc(0))[0]).toBe(1);
    expect(encodeOutputFrame('pty', 0, Buffer.alloc(0))[0]).toBe(3);
  });

  it('should decode what it encodes, up to the largest safe cursor', () => {
    const data = Buffer.from([0, 1, 2, 255]);
    const decoded = decodeOutputFrame(encodeOutputFrame('pty', Number.MAX_SAFE_INTEGER, data));
    expect(decoded.stream).toBe('pty');
    expect(decoded.cursor).toBe(Number.MAX_SAFE_INTEGER);
    expect(decoded.data.equals(data)).toBe(true);
  });

  it('should refuse short frames, unknown streams and cursors past 2^53', () => {
    expect(() => decodeOutputFrame(Buffer.alloc(OUTPUT_FRAME_HEADER_BYTES - 1))).toThrow(RangeError);
    expect(() => decodeOutputFrame(Buffer.from([9, 0, 0, 0, 0, 0, 0, 0, 0]))).toThrow(/unknown stream/);
    const huge = Buffer.alloc(9);
    huge[0] = 1;
    huge.writeBigUInt64BE(2n ** 60n, 1);
    expect(() => decodeOutputFrame(huge)).toThrow(/out of range/);
  });
});
