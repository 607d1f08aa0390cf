/**
 * Follows one execution for a streaming client (SSE or WebSocket): output chunks from per-stream cursors, then status
 * changes, read through `api.readOutput` and woken by `api.waitForOutput`. Pull-based, so a slow consumer paces the
 * reads instead of buffering them. A terminal status is yielded once, last, after every stream is complete: seeing it
 * means the client holds all the output.
 */
import { terminalStatuses, type OutputStreamName } from '../../schemas/api.ts';
import type { Caller, ExecutionRecord, RuntimeApi } from '../runtime/runtime-api.ts';

export type FollowItem =
  | { kind: 'output'; stream: OutputStreamName; cursor: number; data: Buffer; next: number }
  | { kind: 'status'; record: ExecutionRecord; final: boolean };

export interface FollowOptions {
  streams: OutputStreamName[];
  /** Start cursors; advanced in place as chunks are yielded. */
  cursors: Record<OutputStreamName, number>;
  chunkBytes: number;
  pollMs: number;
  signal: AbortSignal;
}

/** A wait shorter than this that brought nothing is paced, so a runtime that wakes at once cannot make a follower spin. */
const MIN_IDLE_WAIT_MS = 20;
/** How often a stream that had nothing is read again while another one is streaming. */
const QUIET_RECHECK_MS = 50;

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });

export async function* followExecution(
  api: RuntimeApi,
  caller: Caller,
  id: string,
  options: FollowOptions,
): AsyncGenerator<FollowItem> {
  const { streams, cursors, chunkBytes, pollMs, signal } = options;
  const complete = new Set<OutputStreamName>();
  let record = await api.getExecution(caller, id);
  let statusCheckedAt = Date.now();
  let reported: string | undefined;
  const quietSince = new Map<OutputStreamName, number>();
  let busy = false;
  while (!signal.aborted) {
    if (!terminalStatuses.has(record.status) && record.status !== reported) {
      reported = record.status;
      yield { kind: 'status', record, final: false };
    }
    let progressed = false;
    for (const stream of streams) {
      if (complete.has(stream) || signal.aborted) continue;
      // While another stream streams, a quiet one is looked at again only now and then (reads cost a round trip).
      if (busy && quietSince.has(stream) && Date.now() - quietSince.get(stream)! < QUIET_RECHECK_MS) continue;
      const read = await api.readOutput(caller, id, stream, cursors[stream], chunkBytes);
      if (read.data.length > 0) {
        const cursor = cursors[stream];
        cursors[stream] = read.next;
        progressed = true;
        quietSince.delete(stream);
        yield { kind: 'output', stream, cursor, data: read.data, next: read.next };
      } else if (read.complete) {
        // Only an empty read of a complete stream proves its end: a full chunk may have more behind it.
        complete.add(stream);
      } else {
        quietSince.set(stream, Date.now());
      }
    }
    busy = progressed;
    if (!progressed || Date.now() - statusCheckedAt >= pollMs) {
      record = await api.getExecution(caller, id);
      statusCheckedAt = Date.now();
    }
    if (terminalStatuses.has(record.status) && complete.size === streams.length) {
      yield { kind: 'status', record, final: true };
      return;
    }
    if (!progressed && !signal.aborted) {
      const waited = Date.now();
      await api.waitForOutput(caller, id, pollMs);
      const early = MIN_IDLE_WAIT_MS - (Date.now() - waited);
      if (early > 0) await pause(early, signal);
    }
  }
}
