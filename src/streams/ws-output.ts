/**
 * One output WebSocket (DESIGN §8), whoever serves it (the gateway for an execution, an Execution Host for an
 * operation): output as binary frames (schemas/ws-frames.ts) from the client's cursors, a status text frame, and
 * stdin/resize/end from the client. The output is paced by the socket: no more is read than fits in `bufferBytes`
 * beside what the socket holds; if no chunk fits for `stallMs` the client is closed with 1013 to reconnect from its
 * last cursor. Closing, for any reason, never cancels the command.
 */
import { WebSocket, type RawData } from 'ws';
import { wsClientControlSchema } from '../../schemas/api.ts';
import { BerthError, errorCodes } from '../../schemas/errors.ts';
import type { OutputStream } from '../../schemas/output.ts';
import { parseOrReject } from '../../schemas/parse-input.ts';
import { closeCodes, encodeOutputFrame, OUTPUT_FRAME_HEADER_BYTES, writeOutputFrameHeader } from '../../schemas/ws-frames.ts';

/** An output item's `data` is valid until the next item is asked for, unless it lies in a buffer `chunkBuffer` gave. */
export type OutputItem =
  | { kind: 'output'; stream: OutputStream; cursor: number; data: Buffer }
  | { kind: 'status'; frame: Record<string, unknown>; final: boolean };

/** What the socket's owner follows and forwards: the command's output and status, and the client's input. */
export interface OutputSource {
  follow(pacing: { room: () => number; signal: AbortSignal; chunkBuffer: (maxBytes: number) => Buffer }): AsyncIterable<OutputItem>;
  writeStdin(bytes: Buffer): Promise<void>;
  endStdin(): Promise<void>;
  resize(cols: number, rows: number): Promise<void>;
}

export interface OutputSocketOptions {
  chunkBytes: number;
  bufferBytes: number;
  stallMs: number;
  /** Where a server that closes ends its open streams itself (1001). */
  streams?: { add(close: () => void): () => void };
  /** The typed error of anything thrown, and the JSON of a text frame (the gateway's writes bigints as strings). */
  toError: (error: unknown) => BerthError;
  stringify: (value: unknown) => string;
  log: { info(detail: object, message: string): void; debug(detail: object, message: string): void; error(detail: object, message: string): void };
}

const ZERO_COPY_MIN_BYTES = 64 * 1024;
const NO_BYTES = Buffer.alloc(0);
/** Frame buffers a stream keeps for its next reads once the socket has written them (the rest go to the collector). */
const SPARE_FRAMES = 2;

export function serveOutputSocket(ws: WebSocket, source: OutputSource, options: OutputSocketOptions): Promise<void> {
  const { log, chunkBytes, bufferBytes, stallMs } = options;
  const abort = new AbortController();
  const unregister = options.streams?.add(() => ws.close(closeCodes.goingAway, 'server closing')) ?? (() => undefined);
  ws.on('close', () => {
    abort.abort();
    unregister();
  });
  ws.on('error', (error) => log.debug({ err: error }, 'output websocket error'));

  const sendError = (error: BerthError) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(options.stringify({ type: 'error', ...error.toBody() }));
  };

  // Client frames run one after another so stdin bytes keep their order. They are read no faster than they are
  // handled: a command that does not read its stdin holds each write (its pipe is full), and a client sending on
  // would queue its frames here without bound (1 GiB sent took a server from 160 MB to 1.1 GB). Past `bufferBytes`
  // waiting, the socket is paused (TCP pushes back on the client) until they are written.
  let input = Promise.resolve();
  let pendingInput = 0;
  ws.on('message', (data: RawData, isBinary: boolean) => {
    const bytes = data as Buffer; // binaryType 'nodebuffer': one Buffer per message
    pendingInput += bytes.length;
    if (pendingInput >= bufferBytes && !ws.isPaused) ws.pause();
    input = input
      .then(() => handleClientFrame(bytes, isBinary))
      .catch((error) => sendError(options.toError(error)))
      .finally(() => {
        pendingInput -= bytes.length;
        if (pendingInput < bufferBytes && ws.isPaused) ws.resume();
      });
  });
  const handleClientFrame = async (bytes: Buffer, isBinary: boolean) => {
    if (isBinary) return source.writeStdin(bytes);
    let json: unknown;
    try {
      json = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new BerthError('invalid_request', 'A text frame must be JSON: {"type":"resize",…} or {"type":"end"}.');
    }
    const control = parseOrReject(wsClientControlSchema, json, 'frame');
    if (control.type === 'end') return source.endStdin();
    return source.resize(control.cols, control.rows);
  };

  // Send callbacks fire as frames reach the socket: each one is a chance for the buffer to have drained. A timer
  // looks again now and then (a socket that takes nothing calls nothing back), and is cleared when a callback wins.
  let wakeDrain: (() => void) | undefined;
  const onSent = () => wakeDrain?.();
  const room = () => Math.max(0, bufferBytes - ws.bufferedAmount);
  const drained = async (): Promise<boolean> => {
    const deadline = Date.now() + stallMs;
    while (room() < Math.min(chunkBytes, bufferBytes)) {
      if (ws.readyState !== WebSocket.OPEN) return false;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(wake, Math.min(left, 50));
        wakeDrain = wake;
        function wake() {
          clearTimeout(timer);
          wakeDrain = undefined;
          resolve();
        }
      });
    }
    return true;
  };

  // Reads of one chunk fill frame buffers, just past the room for the header: a frame goes out whole, one WebSocket
  // frame without a copy (two fragments would cost the client a copy to join them). The socket holds the only
  // reference to a frame it has not written; once written, it is kept for a later read (a few at most: a buffer
  // reused costs no page faults, a fresh one does). The bytes held stay those the room allows: a spare frame holds
  // none of them, and a stalled socket writes none, so it gives none back.
  const header = OUTPUT_FRAME_HEADER_BYTES;
  const frameBytes = header + chunkBytes;
  const ours = new WeakSet<ArrayBufferLike>();
  const spareFrames: Buffer[] = [];
  const chunkBuffer = (maxBytes: number) => {
    let frame = spareFrames.pop();
    if (!frame) {
      frame = Buffer.allocUnsafeSlow(frameBytes); // its own ArrayBuffer: the header's room is ours
      ours.add(frame.buffer);
    }
    return frame.subarray(header, header + Math.min(maxBytes, chunkBytes));
  };
  const inFrame = (data: Buffer) => data.byteOffset === header && ours.has(data.buffer) && data.buffer.byteLength === frameBytes;

  const sendOutput = (stream: OutputStream, cursor: number, data: Buffer) => {
    if (inFrame(data)) {
      const frame = writeOutputFrameHeader(Buffer.from(data.buffer, 0, header + data.length), stream, cursor);
      return ws.send(frame, { binary: true }, (error) => {
        // Kept only while the socket holds little (a client that stops reading keeps none beyond its bound).
        const held = ws.bufferedAmount + spareFrames.length * frameBytes;
        if (!error && spareFrames.length < SPARE_FRAMES && held < bufferBytes) {
          spareFrames.push(Buffer.from(data.buffer, 0, frameBytes));
        }
        onSent();
      });
    }
    // A small frame is copied whole. A large one goes as two fragments of one message, the 9-byte prefix and then the
    // read's own bytes: the socket holds the only copy of what the client has not taken yet (the source's reads are
    // fresh buffers then, never reused).
    if (data.length < ZERO_COPY_MIN_BYTES) return ws.send(encodeOutputFrame(stream, cursor, data), onSent);
    ws.send(encodeOutputFrame(stream, cursor, NO_BYTES), { binary: true, fin: false });
    ws.send(data, { binary: true, fin: true }, onSent);
  };

  const pump = async () => {
    for await (const item of source.follow({ room, signal: abort.signal, chunkBuffer })) {
      if (ws.readyState !== WebSocket.OPEN) return;
      if (item.kind === 'output') sendOutput(item.stream, item.cursor, item.data);
      else ws.send(options.stringify({ type: 'status', ...item.frame }), onSent);
      if (item.kind === 'status' && item.final) {
        ws.close(closeCodes.complete, 'complete');
        return;
      }
      if (!(await drained())) {
        if (ws.readyState === WebSocket.OPEN) {
          log.info({ buffered: ws.bufferedAmount }, 'closing a websocket client that stopped reading');
          ws.close(closeCodes.tryAgainLater, 'client too slow; reconnect from your cursors');
          // The close frame waits behind what the client does not read: give it one more window, then drop the
          // socket and what it buffers (ws alone would keep them 30 s).
          const drop = setTimeout(() => ws.terminate(), stallMs);
          ws.once('close', () => clearTimeout(drop));
        }
        return;
      }
    }
  };

  return pump().catch((error) => {
    const mapped = options.toError(error);
    if (mapped.status >= 500) log.error({ err: error }, 'output websocket failed');
    sendError(mapped);
    const code = errorCodes[mapped.code].retryable ? closeCodes.tryAgainLater : closeCodes.internal;
    if (ws.readyState === WebSocket.OPEN) ws.close(code, mapped.code);
  });
}
