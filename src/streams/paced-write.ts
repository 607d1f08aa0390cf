/**
 * Writing to a long-lived HTTP response at the pace of its client: a write the socket does not take at once waits
 * for it to drain, and a client that takes nothing for the stall window is dropped (the 1013 rule of DESIGN §8: it
 * reconnects from its last cursor), so a reader that stopped holds no more than its socket's buffer. Shared by the
 * gateway's event streams and the Execution Host's output replay.
 */
import type { Writable } from 'node:stream';

/**
 * Writes `chunk`; resolves once the socket accepts more, or it closed, or it took nothing for `stallMs` (then
 * `onStall` drops it: a client that does not read would keep the buffer forever).
 */
export async function writePaced(out: Writable, chunk: string | Buffer, stallMs: number, onStall: () => void): Promise<void> {
  if (out.destroyed || out.writableEnded) return;
  if (!out.write(chunk)) await drained(out, stallMs, onStall);
}

/** Resolves once `out` drained or closed, or after `stallMs` of neither (then `onStall` drops it). */
export function drained(out: Writable, stallMs: number, onStall: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const stalled = setTimeout(() => {
      done();
      onStall();
    }, stallMs);
    function done() {
      clearTimeout(stalled);
      out.off('drain', done);
      out.off('close', done);
      resolve();
    }
    out.once('drain', done);
    out.once('close', done);
  });
}
