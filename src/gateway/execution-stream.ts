/**
 * One execution WebSocket (DESIGN §8): the shared output socket (src/streams/ws-output.ts) fed by the runtime's
 * follower of the execution, its input forwarded to the runtime, with the gateway's bounds. Closing, for any reason,
 * never cancels the execution.
 */
import type { WebSocket } from 'ws';
import type { FastifyBaseLogger } from 'fastify';
import { outputStreams, type OutputStream } from '../../schemas/output.ts';
import type { Caller } from '../runtime/runtime-api.ts';
import { toBerthError } from './errors.ts';
import { followExecution } from './output-follower.ts';
import type { GatewayDeps } from './route.ts';
import { stringifyWire } from './wire-json.ts';
import { serveOutputSocket, type OutputItem } from '../streams/ws-output.ts';

export interface ExecutionStreamOptions {
  deps: GatewayDeps;
  caller: Caller;
  id: string;
  cursors: Record<OutputStream, number>;
  log: FastifyBaseLogger;
}

export function serveExecutionStream(ws: WebSocket, options: ExecutionStreamOptions): Promise<void> {
  const { deps, caller, id } = options;
  const log = options.log.child({ execution: id });
  return serveOutputSocket(
    ws,
    {
      async *follow({ room, signal, chunkBuffer }): AsyncGenerator<OutputItem> {
        const follow = followExecution(deps.api, caller, id, {
          streams: outputStreams,
          cursors: options.cursors,
          chunkBytes: deps.limits.chunkBytes,
          // One chunk per read: a larger read would take turns in reused buffers, which a socket must not be given.
          readBytes: deps.limits.chunkBytes,
          room,
          pollMs: deps.limits.pollMs,
          signal,
          chunkBuffer,
        });
        for await (const item of follow) yield item.kind === 'output' ? item : { kind: 'status', frame: { ...item.record }, final: item.final };
      },
      writeStdin: (bytes) => deps.api.writeStdin(caller, id, bytes),
      endStdin: () => deps.api.endStdin(caller, id),
      resize: (cols, rows) => deps.api.resize(caller, id, cols, rows),
    },
    {
      chunkBytes: deps.limits.chunkBytes,
      bufferBytes: deps.limits.streamBufferBytes,
      stallMs: deps.limits.streamStallMs,
      streams: deps.streams,
      toError: toBerthError,
      stringify: stringifyWire,
      log,
    },
  );
}
