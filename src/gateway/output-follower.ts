/**
 * Follows one execution for a streaming client (SSE or WebSocket): output chunks from per-stream cursors, then status
 * changes, read through `api.readOutput` and woken by `api.waitForOutput`. Pull-based, so a slow consumer paces the
 * reads instead of buffering them, and no read (made ahead or not) exceeds what the consumer says it can take. A terminal status is yielded once, last, after every stream is complete (ended and
 * saved): seeing it means the client holds all the output and can read it again by cursor.
 */
import type { OutputStream } from '../../schemas/output.ts';
import { terminalStatuses } from '../../schemas/states.ts';
import type { Caller, ExecutionRecord, RuntimeApi } from '../runtime/runtime-api.ts';
import { StreamReader, type ChunkBuffer, type ReadAt } from './stream-reader.ts';

/** An output item's `data` is valid until the next item is asked for (its buffer is reused): copy it to keep it. */
export type FollowItem =
  | { kind: 'output'; stream: OutputStream; cursor: number; data: Buffer; next: number }
  | { kind: 'status'; record: ExecutionRecord; final: boolean };

export interface FollowOptions {
  streams: readonly OutputStream[];
  /** Start cursors; advanced in place as chunks are yielded. */
  cursors: Record<OutputStream, number>;
  /** Largest chunk yielded. */
  chunkBytes: number;
  /** Largest read of the runtime: a stream that fills its reads gets larger ones, up to this, yielded chunk by chunk. */
  readBytes: number;
  /** Output bytes the consumer can take now (room left in its socket's buffer): the bound of every read. */
  room: () => number;
  pollMs: number;
  signal: AbortSignal;
  /**
   * The buffer a read of at most one chunk fills, if the consumer provides them: such an item's `data` is then the
   * consumer's to keep (the follower never reuses it).
   */
  chunkBuffer?: ChunkBuffer;
}

/** How often a stream that had nothing is read again while another one is streaming. */
const QUIET_RECHECK_MS = 50;
/** How long a follower that caught up with a busy writer lets it write before reading on. */
const EDGE_PAUSE_MS = 1;

export async function* followExecution(
  api: RuntimeApi,
  caller: Caller,
  id: string,
  options: FollowOptions,
): AsyncGenerator<FollowItem> {
  const { streams, cursors, chunkBytes, pollMs, signal } = options;
  const readBytes = Math.max(chunkBytes, options.readBytes);
  /** Streams whose bytes are all yielded (no byte will follow), and those of them known saved too. */
  const closed = new Set<OutputStream>();
  const complete = new Set<OutputStream>();
  const readers = new Map(
    streams.map((stream) => {
      const readAt: ReadAt = (cursor, maxBytes, into) => api.readOutput(caller, id, stream, cursor, maxBytes, into);
      return [stream, new StreamReader(readAt, chunkBytes, readBytes, undefined, options.chunkBuffer)];
    }),
  );
  let record = await api.getExecution(caller, id);
  let statusCheckedAt = Date.now();
  let reported: string | undefined;
  const quietSince = new Map<OutputStream, number>();
  /** Streams whose last read came back short right after full ones: the reads caught up with a busy writer. */
  const atEdge = new Set<OutputStream>();
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
      const reader = readers.get(stream)!;
      // Reading again at once would take the few bytes the writer added since (a frame and a round trip each):
      // a moment lets a busy writer fill the next read.
      if (atEdge.delete(stream)) await new Promise((r) => setTimeout(r, EDGE_PAUSE_MS));
      const wasStreaming = reader.streaming;
      // A stream that fills its reads is read ahead again now that the consumer has sent what it held (in the room
      // its socket has now: when the socket drains fast, the next reads overlap instead of following each other).
      if (reader.streaming) reader.readAhead(cursors[stream], options.room());
      const got = await reader.next(cursors[stream], options.room());
      if (got.data.length > 0) {
        progressed = true;
        quietSince.delete(stream);
        // The next bytes are read while the consumer sends these, in what room its socket has beyond them.
        if (got.closed) closed.add(stream);
        else if (wasStreaming && !reader.streaming) atEdge.add(stream);
        else reader.readAhead(got.next, options.room() - got.data.length);
        for (let offset = 0; offset < got.data.length && !signal.aborted; offset += chunkBytes) {
          const data = got.data.subarray(offset, offset + chunkBytes);
          const cursor = cursors[stream];
          cursors[stream] = cursor + data.length;
          yield { kind: 'output', stream, cursor, data, next: cursors[stream] };
        }
      } else if (got.complete) {
        complete.add(stream);
      } else {
        // An ended stream is read again once the lifecycle moves on, to learn that it is saved.
        if (got.closed) closed.add(stream);
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
      // Woken exactly when a stream holds bytes past its cursor or ends, or the lifecycle moves on: never a spin.
      const open = streams.filter((s) => !closed.has(s)).map((s) => [s, cursors[s]]);
      await api.waitForOutput(caller, id, pollMs, { cursors: Object.fromEntries(open), step: record.step });
    }
  }
}
