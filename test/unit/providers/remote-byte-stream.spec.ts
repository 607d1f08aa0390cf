/**
 * The control plane's hand-spoken client of a host's byte stream (src/providers/remote/byte-stream.ts) against real
 * HTTP servers (Node's own, as the host is) on a Unix socket and over TLS: every byte in order through a sink that
 * pauses the connection and resumes it, a clean end only at the last chunk, a cut body or one that is not chunked HTTP reported broken, a refusal
 * answered with its status and body, a missing socket unreachable; and the ring the bytes are held in.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ByteRing } from '../../../src/providers/remote/byte-ring.ts';
import { openByteStream, type ByteSink, type StreamRequest } from '../../../src/providers/remote/byte-stream.ts';
import { selfSigned } from '../../fixtures/self-signed.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-byte-stream-'));
const socketPath = join(dir, 'host.sock');
const { certPath, keyPath } = selfSigned(dir);
/** 3 MiB and a bit of a pattern no shifted copy repeats, written in odd pieces. */
const payload = Buffer.from(Array.from({ length: 3 * 1024 * 1024 + 12345 }, (_, i) => (i * 7 + (i >> 13)) & 0xff));

/** The host's behaviour, chosen by path: the payload chunked, a body cut halfway, or a typed refusal. */
function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  req.resume();
  req.on('end', () => {
    expect(req.headers['berth-test']).toBe('1');
    if (req.url === '/refused') {
      res.writeHead(409, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ error: { code: 'stale_target', message: 'stale' } }));
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const pieces = req.url === '/cut' ? [payload.subarray(0, 100_000)] : [payload.subarray(0, 1), payload.subarray(1, 70_001), payload.subarray(70_001)];
    for (const piece of pieces) res.write(piece);
    if (req.url === '/cut') setTimeout(() => res.socket?.destroy(), 50);
    else res.end();
  });
}

const unixServer = http.createServer(handler);
const tlsServer = https.createServer({ cert: readFileSync(certPath), key: readFileSync(keyPath) }, handler);
let tlsPort = 0;

beforeAll(async () => {
  await new Promise<void>((resolve) => unixServer.listen(socketPath, resolve));
  await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
  tlsPort = (tlsServer.address() as AddressInfo).port;
});

afterAll(() => {
  unixServer.close();
  tlsServer.close();
  rmSync(dir, { recursive: true, force: true });
});

const request = (path: string, connect: StreamRequest['connect'] = { socketPath }): StreamRequest => ({
  connect,
  head: `POST ${path} HTTP/1.1\r\nhost: localhost\r\nberth-test: 1`,
  body: Buffer.from('{}'),
  refused: (answer) => Object.assign(new Error('refused'), { answer }),
  unreachable: (e) => Object.assign(new Error('unreachable'), { code: e.code }),
});

/** Collects a stream; pauses it at its first bytes for 100 ms when `pause`. */
function collect(path: string, connect?: StreamRequest['connect'], pause = false) {
  const received: Buffer[] = [];
  let paused = false;
  let resume = () => {};
  const done = new Promise<'end' | 'broken'>((resolve) => {
    const sink: ByteSink = {
      data: (view) => {
        received.push(Buffer.from(view));
        if (!pause || paused) return true;
        paused = true;
        setTimeout(() => resume(), 100);
        return false;
      },
      end: () => resolve('end'),
      broken: () => resolve('broken'),
    };
    openByteStream(request(path, connect), sink).then((source) => (resume = () => source.resume()));
  });
  return { done, bytes: () => Buffer.concat(received), paused: () => paused };
}

describe('the byte stream client', () => {
  it('hands over every byte in order over a Unix socket and ends cleanly at the last chunk', async () => {
    const stream = collect('/ok');
    expect(await stream.done).toBe('end');
    expect(stream.bytes().equals(payload)).toBe(true);
  });

  it('pauses the connection when the sink says so and loses nothing once resumed', async () => {
    const stream = collect('/ok', undefined, true);
    expect(await stream.done).toBe('end');
    expect(stream.paused()).toBe(true);
    expect(stream.bytes().equals(payload)).toBe(true);
  });

  it('speaks TLS with the host CA, same bytes', async () => {
    const stream = collect('/ok', { host: '127.0.0.1', port: tlsPort, tls: { ca: readFileSync(certPath) } });
    expect(await stream.done).toBe('end');
    expect(stream.bytes().equals(payload)).toBe(true);
  });

  it('reports a body cut before its last chunk as broken, with the bytes before the cut', async () => {
    const stream = collect('/cut');
    expect(await stream.done).toBe('broken');
    expect(stream.bytes().equals(payload.subarray(0, 100_000))).toBe(true);
  });

  it('reports a body that is not chunked HTTP (an endless size line) as broken, holding none of it', async () => {
    const path = join(dir, 'garbage.sock');
    const garbage = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
      socket.write('f'.repeat(200_000));
    });
    await new Promise<void>((resolve) => garbage.listen(path, resolve));
    try {
      const stream = collect('/ok', { socketPath: path });
      expect(await stream.done).toBe('broken');
      expect(stream.bytes().length).toBe(0);
    } finally {
      garbage.close();
    }
  });

  it('rejects a refusal with its status and body, and a missing socket as unreachable', async () => {
    const sink: ByteSink = { data: () => true, end: () => {}, broken: () => {} };
    const refused = await openByteStream(request('/refused'), sink).then(
      () => ({ status: 200, body: Buffer.from('{}') }),
      (e: { answer: { status: number; body: Buffer } }) => e.answer,
    );
    expect(refused.status).toBe(409);
    expect(JSON.parse(refused.body.toString('utf8')).error.code).toBe('stale_target');
    const missing = await openByteStream(request('/ok', { socketPath: join(dir, 'absent.sock') }), sink).then(
      () => 'answered',
      (e: { code: string }) => e.code,
    );
    expect(missing).toBe('ENOENT');
  });
});

describe('the byte ring', () => {
  it('gives back what was pushed, in order, across wraps and growth', () => {
    const ring = new ByteRing(4 << 20);
    const expected: Buffer[] = [];
    const got: Buffer[] = [];
    let seed = 1;
    const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    for (let round = 0; round < 150; round++) {
      const piece = Buffer.alloc(next() % 200_000, round & 0xff);
      ring.push(piece);
      expected.push(piece);
      const out = Buffer.alloc(next() % 300_000);
      const n = ring.shift(out, out.length);
      got.push(out.subarray(0, n));
    }
    const rest = Buffer.alloc(ring.length);
    ring.shift(rest, rest.length);
    got.push(rest);
    expect(ring.length).toBe(0);
    expect(Buffer.concat(got).equals(Buffer.concat(expected))).toBe(true);
  });
});
