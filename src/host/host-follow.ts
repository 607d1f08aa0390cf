/**
 * Output replay from an Execution Host as server-sent events, in the gateway's frames (schemas/sse-frames.ts) and
 * through the gateway's own writer (src/streams/sse-writer.ts): output events from per-stream cursors (resumable by
 * Last-Event-ID `<stream>:<cursor>`), then one `status` event with the final receipt once every stream is closed. A
 * client that takes nothing for the stall window is dropped (the 1013 rule: it reconnects from its last cursor); a
 * disconnect never cancels the command.
 */
import type http from 'node:http';
import { outputEventIdSchema } from '../../schemas/api.ts';
import { BerthError } from '../../schemas/errors.ts';
import { outputStreams, type OutputStream } from '../../schemas/output.ts';
import { outputSseEvent } from '../../schemas/sse-frames.ts';
import type { Executor, Receipt } from '../providers/provider.ts';
import { SseWriter } from '../streams/sse-writer.ts';
import { replayLimits, type ReplayLog } from './replay-limits.ts';

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
  log: ReplayLog,
): Promise<void> {
  const resume = resumeAt(req.headers['last-event-id']);
  if (resume) cursors[resume.stream] = resume.cursor;
  const sse = new SseWriter(res, { heartbeatMs: replayLimits.heartbeatMs, stallMs: replayLimits.stallMs, bufferBytes: replayLimits.bufferBytes, log });
  try {
    const closed = new Set<OutputStream>();
    while (!sse.closed) {
      let wrote = false;
      for (const stream of outputStreams) {
        if (closed.has(stream)) continue;
        const chunk = await executor.read(operationId, stream, cursors[stream], replayLimits.eventBytes);
        if (chunk.data.length > 0) {
          await sse.send(outputSseEvent(stream, cursors[stream], chunk.data, chunk.next));
          wrote = true;
        } else if (chunk.closed) closed.add(stream);
        cursors[stream] = chunk.next;
        if (sse.closed) return;
      }
      if (closed.size === outputStreams.length) {
        await sse.send({ event: 'status', data: JSON.stringify(withoutPid(await executor.status(operationId))) });
        return;
      }
      if (!wrote) await executor.waitForChange(operationId, replayLimits.waitMs, cursors);
    }
  } finally {
    sse.end();
  }
}
