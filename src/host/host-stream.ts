/**
 * One output stream of an operation from a byte offset, as the raw bytes of one chunked HTTP body: no frame, no
 * JSON, no base64, one request for the whole stream instead of one per read. The body ends cleanly once the stream is
 * closed (every byte final); any other end (the host dropped a client that took nothing for the stall window, a
 * crash, a cut) is a broken body, and the client reads on from the offset it reached. Never cancels the command.
 */
import type http from 'node:http';
import type { OutputStream } from '../../schemas/output.ts';
import type { Executor } from '../providers/provider.ts';
import { drained } from '../streams/paced-write.ts';
import { replayLimits, type ReplayLog } from './replay-limits.ts';

/** Buffers a stream keeps for its reads once the socket wrote them (a reused buffer costs no page faults). */
const SPARE_BUFFERS = 2;

export async function streamOutput(
  executor: Executor,
  operationId: string,
  stream: OutputStream,
  from: number,
  res: http.ServerResponse,
  log: ReplayLog,
): Promise<void> {
  let cursor = from;
  // The first read comes before the headers: a refusal (an unknown operation, a swapped file) is still a typed error.
  let chunk = await executor.read(operationId, stream, cursor, replayLimits.streamBytes);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
  res.flushHeaders();
  const spare: Buffer[] = [];
  const drop = () => {
    log.info({ operationId, stream, cursor }, 'dropping a byte stream client that stopped reading');
    res.destroy();
  };
  for (;;) {
    let draining: Promise<void> | undefined;
    if (chunk.data.length > 0) {
      const data = chunk.data;
      // Given back once the socket wrote it: until then the socket holds the only reference.
      res.write(data, (error) => {
        if (!error && spare.length < SPARE_BUFFERS && data.byteOffset === 0 && data.buffer.byteLength === replayLimits.streamBytes) {
          spare.push(Buffer.from(data.buffer, 0, replayLimits.streamBytes));
        }
      });
      if (res.writableNeedDrain) draining = drained(res, replayLimits.stallMs, drop);
    }
    if (chunk.closed) {
      await draining;
      return void res.end();
    }
    cursor = chunk.next;
    if (chunk.data.length === 0) await executor.waitForChange(operationId, replayLimits.waitMs, { [stream]: cursor });
    if (res.destroyed) return;
    // The next read is made while the socket takes the last chunk; at most two chunks are held.
    const into = spare.pop() ?? Buffer.allocUnsafeSlow(replayLimits.streamBytes);
    [chunk] = await Promise.all([executor.read(operationId, stream, cursor, replayLimits.streamBytes, into), draining]);
    if (res.destroyed) return;
  }
}
