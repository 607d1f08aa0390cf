/**
 * Output replay from an Execution Host as server-sent events, in the gateway's frames (schemas/sse-frames.ts):
 * output events from per-stream cursors (resumable by Last-Event-ID `<stream>:<cursor>`), then one `status` event
 * with the final receipt once every stream is closed. A client that takes nothing for the stall window is dropped
 * (the gateway's 1013 rule: it reconnects from its last cursor); a disconnect never cancels the command.
 */
import type http from 'node:http';
import { outputEventIdSchema } from '../../schemas/api.ts';
import { BerthError } from '../../schemas/errors.ts';
import { outputStreams, type OutputStream } from '../../schemas/output.ts';
import { formatSseComment, formatSseEvent, outputSseEvent, type SseEvent } from '../../schemas/sse-frames.ts';
import type { Executor, Receipt } from '../providers/provider.ts';

/** Bytes per output event (base64 in JSON: about 64 KiB on the wire). */
const EVENT_BYTES = 48 * 1024;
const HEARTBEAT_MS = 15_000;
const STALL_MS = 10_000;
const WAIT_MS = 1_000;

/** `<stream>:<cursor>` of a Last-Event-ID header (the gateway's own schema), or undefined when there is none. */
function resumeAt(header: string | string[] | undefined): { stream: OutputStream; cursor: number } | undefined {
  if (header === undefined) return undefined;
  const parsed = outputEventIdSchema.safeParse(String(header));
  if (!parsed.success) throw new BerthError('invalid_request', 'Last-Event-ID must be <stream>:<cursor>.', { lastEventId: String(header) });
  return parsed.data;
}

export async function followOperation(
  executor: Executor,
  operationId: string,
  cursors: Record<OutputStream, number>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  withoutPid: (receipt: Receipt) => Receipt,
): Promise<void> {
  const resume = resumeAt(req.headers['last-event-id']);
  if (resume) cursors[resume.stream] = resume.cursor;
  let gone = false;
  res.on('close', () => (gone = true));
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform' });
  res.flushHeaders();
  const heartbeat = setInterval(() => res.write(formatSseComment('heartbeat')), HEARTBEAT_MS);
  /** Writes one event; drops the client when it took nothing for the stall window. */
  const send = async (event: SseEvent) => {
    if (res.write(formatSseEvent(event))) return;
    const drained = await new Promise<boolean>((resolve) => {
      const stalled = setTimeout(() => resolve(false), STALL_MS);
      res.once('drain', () => (clearTimeout(stalled), resolve(true)));
      res.once('close', () => (clearTimeout(stalled), resolve(true)));
    });
    if (!drained) res.destroy();
  };
  try {
    const closed = new Set<OutputStream>();
    while (!gone) {
      let wrote = false;
      for (const stream of outputStreams) {
        if (closed.has(stream)) continue;
        const chunk = await executor.read(operationId, stream, cursors[stream], EVENT_BYTES);
        if (chunk.data.length > 0) {
          await send(outputSseEvent(stream, cursors[stream], chunk.data, chunk.next));
          wrote = true;
        } else if (chunk.closed) closed.add(stream);
        cursors[stream] = chunk.next;
        if (gone) return;
      }
      if (closed.size === outputStreams.length) {
        await send({ event: 'status', data: JSON.stringify(withoutPid(await executor.status(operationId))) });
        return;
      }
      if (!wrote) await executor.waitForChange(operationId, WAIT_MS, cursors);
    }
  } finally {
    clearInterval(heartbeat);
    if (!res.destroyed) res.end();
  }
}
