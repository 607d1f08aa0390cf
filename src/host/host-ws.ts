/**
 * Output replay from an Execution Host over WebSocket: `GET /v1/exec/follow` with an upgrade, the follow call (target,
 * operationId, cursors) in the `berth-call` header as JSON. Admitted like any call (client certificate and/or
 * credential, protocol version, schema, the target's fence) before the handshake; a refusal is the typed error as
 * plain HTTP. Then the gateway's own output socket (src/streams/ws-output.ts): the same frames, the same 1013 rule,
 * stdin/resize/end forwarded; a disconnect never cancels the command.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import { CALL_HEADER, execCallSchemas, type ExecCall } from '../../schemas/host-protocol.ts';
import { outputStreams, type OutputStream } from '../../schemas/output.ts';
import type { Executor } from '../providers/provider.ts';
import { serveOutputSocket, type OutputItem, type OutputSource } from '../streams/ws-output.ts';
import { checkProtocol, parsed } from './host-call.ts';
import { withoutPid, type HostDispatch } from './host-dispatch.ts';
import { replayLimits, type ReplayLog } from './replay-limits.ts';

/** The largest client frame (stdin chunks, controls). */
const MAX_PAYLOAD_BYTES = 1 << 20;

/** The `upgrade` listener of a host's servers. */
export function hostUpgrade(admits: (req: http.IncomingMessage) => void, dispatch: HostDispatch, log: ReplayLog): (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES });
  return (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    let executor: Executor;
    let call: ExecCall<'follow'>;
    try {
      admits(req);
      checkProtocol(req);
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' || path !== '/v1/exec/follow') throw new BerthError('not_found', 'Only /v1/exec/follow accepts WebSocket upgrades.', { path });
      const header = req.headers[CALL_HEADER];
      let json: unknown;
      try {
        json = JSON.parse(String(header ?? ''));
      } catch {
        throw new BerthError('invalid_request', `The ${CALL_HEADER} header must hold the follow call as JSON.`);
      }
      call = parsed(execCallSchemas.follow, json);
      executor = dispatch.executor(call.target);
    } catch (e) {
      return refuse(socket, isBerthError(e) ? e : new BerthError('internal', 'The host failed to answer.'));
    }
    const cursors = { stdout: 0, stderr: 0, pty: 0, ...call.cursors };
    wss.handleUpgrade(req, socket, head, (ws) => {
      void serveOutputSocket(ws, operationSource(executor, call.operationId, cursors), {
        chunkBytes: replayLimits.eventBytes,
        bufferBytes: replayLimits.bufferBytes,
        stallMs: replayLimits.stallMs,
        toError: (e) => (isBerthError(e) ? e : new BerthError('internal', 'The host failed to answer.')),
        stringify: JSON.stringify,
        log: { ...log, debug: () => undefined, error: (_d, message) => log.info({}, message) },
      });
    });
  };
}

/** The typed error as a plain HTTP answer on the socket, then the socket closed: nothing was dispatched. */
function refuse(socket: Duplex, error: BerthError): void {
  const body = JSON.stringify(error.toBody());
  socket.end(`HTTP/1.1 ${error.status} ${error.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/** One operation of a host's executor as an output socket's source: its receipt, its output from the cursors, its final receipt. */
function operationSource(executor: Executor, operationId: string, cursors: Record<OutputStream, number>): OutputSource {
  return {
    async *follow({ room, signal, chunkBuffer }): AsyncGenerator<OutputItem> {
      yield { kind: 'status', frame: { ...withoutPid(await executor.status(operationId)) }, final: false };
      const closed = new Set<OutputStream>();
      while (!signal.aborted) {
        let wrote = false;
        for (const stream of outputStreams) {
          if (closed.has(stream)) continue;
          // The socket asks for the next item only once a chunk fits (its 1013 rule); the bound is kept all the same.
          const bound = Math.max(1, Math.min(replayLimits.eventBytes, room()));
          const cursor = cursors[stream];
          const chunk = await executor.read(operationId, stream, cursor, bound, chunkBuffer(bound));
          cursors[stream] = chunk.next;
          if (chunk.data.length > 0) {
            wrote = true;
            yield { kind: 'output', stream, cursor, data: chunk.data };
          } else if (chunk.closed) closed.add(stream);
        }
        if (closed.size === outputStreams.length) {
          yield { kind: 'status', frame: { ...withoutPid(await executor.status(operationId)) }, final: true };
          return;
        }
        if (!wrote) await executor.waitForChange(operationId, replayLimits.waitMs, cursors);
      }
    },
    writeStdin: (bytes) => executor.writeStdin(operationId, bytes),
    endStdin: () => executor.endStdin(operationId),
    resize: (cols, rows) => executor.resize(operationId, cols, rows),
  };
}
