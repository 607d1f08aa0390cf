/**
 * An execution WebSocket client written from DESIGN §8 alone, with the frames decoded here by hand (not with the
 * gateway's codec): binary = byte 0 stream (1 stdout, 2 stderr, 3 pty), bytes 1-8 u64 big-endian cursor of the
 * first data byte, then data; text = JSON status/error. It records every byte per stream, checks that frames are
 * contiguous, and knows its cursors for a reconnect.
 */
import { WebSocket } from 'ws';

const names: Record<number, string> = { 1: 'stdout', 2: 'stderr', 3: 'pty' };

export interface RawSession {
  ws: WebSocket;
  bytes: Record<string, Buffer[]>;
  /** Cursor after the last byte received, per stream. */
  cursors: Record<string, number>;
  /** The cursor of each stream's first frame on this connection. */
  firstCursor: Record<string, number>;
  texts: Record<string, any>[];
  /** Frames that broke contiguity (must stay empty). */
  gaps: string[];
  closed: Promise<number>;
  opened: Promise<void>;
  /** Resolves once `stream` holds at least `bytes`. */
  received(stream: string, bytes: number): Promise<void>;
  joined(stream: string): Buffer;
}

/** Connects to `url` (ws://…/v1/executions/{id}/stream?stdout=&stderr=). */
export function rawConnect(url: string, headers: Record<string, string>): RawSession {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false });
  const waiters = new Set<() => void>();
  const session: RawSession = {
    ws,
    bytes: { stdout: [], stderr: [], pty: [] },
    cursors: {},
    firstCursor: {},
    texts: [],
    gaps: [],
    closed: new Promise((resolve) => ws.on('close', (code) => resolve(code))),
    opened: new Promise((resolve, reject) => {
      ws.on('open', () => resolve());
      ws.on('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.on('error', reject);
    }),
    received(stream, bytes) {
      return new Promise((resolve) => {
        const check = () => {
          if ((session.cursors[stream] ?? 0) - (session.firstCursor[stream] ?? 0) < bytes) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    },
    joined: (stream) => Buffer.concat(session.bytes[stream]!),
  };
  session.opened.catch(() => undefined);
  ws.on('message', (data: Buffer, isBinary) => {
    if (!isBinary) return void session.texts.push(JSON.parse(data.toString()));
    const stream = names[data[0]!] ?? `unknown-${data[0]}`;
    const cursor = Number(data.readBigUInt64BE(1));
    const payload = Buffer.from(data.subarray(9));
    if (session.cursors[stream] === undefined) session.firstCursor[stream] = cursor;
    else if (cursor !== session.cursors[stream]) session.gaps.push(`${stream}: expected ${session.cursors[stream]}, got ${cursor}`);
    session.cursors[stream] = cursor + payload.length;
    (session.bytes[stream] ??= []).push(payload);
    for (const waiter of [...waiters]) waiter();
  });
  return session;
}
