/**
 * A client that never stops sending a request body cannot make the server read forever or hold what it sends.
 * Against a real `berth serve`, an endless chunked body (as fast as the socket takes it, or trickled) to a JSON route,
 * a file upload, and a request with no token is cut off once the server has dropped 64 MiB past its answer, or after
 * BERTH_BODY_DISCARD_MS, whichever comes first; the answer is in the error shape when it gets through, the server's
 * memory stays flat, and it keeps answering. (Before the bound, a refused request's body was read to its end: a
 * request with no token kept the server reading at line rate until node's 5-minute request timeout.)
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, residentGrowth } from './stalled-client.ts';

const MiB = 1024 * 1024;
const DISCARD_BYTES = 64 * MiB; // the gateway's default
const DISCARD_MS = 3000;
/** The largest a TCP socket's receive or send buffer may grow to here (the third field of tcp_rmem / tcp_wmem). */
const bufferMax = (which: 'rmem' | 'wmem', otherwise: number): number => {
  try {
    return Number(readFileSync(`/proc/sys/net/ipv4/tcp_${which}`, 'utf8').trim().split(/\s+/)[2]) || otherwise;
  } catch {
    return otherwise;
  }
};
/**
 * What may be on its way beyond what the server read: the server's receive buffer and the client's send buffer, each
 * as large as the kernel lets them grow (a server slowed by a busy machine lets both fill: 32 + 4 MiB here), and the
 * chunk node queued when the socket said it was full.
 */
const KERNEL_SLACK = bufferMax('rmem', 32 * MiB) + bufferMax('wmem', 4 * MiB) + MiB;

let server: BerthServer;
let env: string;

beforeAll(async () => {
  server = await startServer([], { BERTH_MAX_FILE_BYTES: String(MiB), BERTH_BODY_DISCARD_MS: String(DISCARD_MS) });
  env = await createEnvironment(server);
});
afterAll(() => server?.close());

interface Cutoff {
  /** Body bytes the client handed to its socket before the server ended the connection. */
  sent: number;
  ms: number;
  /** What the server wrote back, if it got through before the connection was reset. */
  answer: string;
}

/**
 * Sends `method path` with a chunked body that never ends: 256 KiB chunks as fast as the socket takes them, or
 * `trickle` bytes every 20 ms. Resolves when the server ends the connection; rejects if it has not after `giveUpMs`.
 */
function sendEndless(method: string, path: string, token: string | null, trickle?: number, giveUpMs = 60_000): Promise<Cutoff> {
  const { hostname, port } = new URL(server.url);
  const head = [`${method} ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked'];
  if (token) head.push(`Authorization: Bearer ${token}`);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(Number(port), hostname);
    const answer: Buffer[] = [];
    let sent = 0;
    let open = true;
    const frame = (size: number) => Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, 'y'), Buffer.from('\r\n')]);
    const chunk = frame(256 * 1024);
    const write = (): void => {
      while (open && !trickle) {
        sent += 256 * 1024;
        if (!socket.write(chunk)) return void socket.once('drain', write);
      }
    };
    const drip = trickle ? frame(trickle) : undefined;
    const dripper = drip ? setInterval(() => open && socket.write(drip) && (sent += trickle!), 20) : undefined;
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${method} ${path}: still open after ${giveUpMs} ms, ${sent} bytes sent`));
    }, giveUpMs);
    socket.on('data', (d: Buffer) => answer.push(d));
    socket.on('error', () => undefined); // EPIPE / ECONNRESET: the cut-off being tested
    socket.once('close', () => {
      open = false;
      clearInterval(dripper);
      clearTimeout(giveUp);
      resolve({ sent, ms: performance.now() - started, answer: Buffer.concat(answer).toString('latin1') });
    });
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    write();
  });
}

/** The error code of the answer when its head and body got through, else undefined (a reset may eat it). */
const answeredCode = (answer: string): string | undefined => /"code":"([a-z_]+)"/.exec(answer)?.[1];

describe('an endless request body', () => {
  it('is cut off after at most 64 MiB past the answer, with the server memory flat and serving', { timeout: 240_000 }, async () => {
    const { grown, label } = await residentGrowth(server.process.child.pid!, async () => {
      const cases = [
        { method: 'POST', path: '/v1/environments', token: tokens.alice, code: 'body_too_large', read: MiB },
        { method: 'PUT', path: `/v1/environments/${env}/files/endless.bin`, token: tokens.alice, code: 'file_too_large', read: MiB },
        { method: 'POST', path: '/v1/environments', token: null, code: 'unauthorized', read: 0 },
      ];
      for (const c of cases) {
        const cut = await sendEndless(c.method, c.path, c.token);
        const label = `${c.method} ${c.path} (${c.token ? 'token' : 'no token'}): ${cut.sent} bytes in ${Math.round(cut.ms)} ms`;
        expect(cut.sent, label).toBeLessThan(c.read + DISCARD_BYTES + KERNEL_SLACK);
        expect(cut.ms, label).toBeLessThan(DISCARD_MS + 5000);
        const code = answeredCode(cut.answer);
        if (code !== undefined) expect(code, label).toBe(c.code);
        expect(await healthLatency(server.url, 5000), label).toBeLessThan(5000);
      }
    }, 50);
    // Dropped bytes are not kept: a few chunk buffers at a time, not the 64 MiB each client pushed.
    expect(grown, label).toBeLessThan(48 * MiB);
    expect(server.process.child.exitCode).toBeNull();
  });

  it('is cut off after BERTH_BODY_DISCARD_MS when it trickles', { timeout: 60_000 }, async () => {
    const cut = await sendEndless('POST', '/v1/environments', null, 1024, 20_000);
    expect(cut.ms, `${cut.sent} bytes in ${Math.round(cut.ms)} ms`).toBeGreaterThanOrEqual(DISCARD_MS - 100);
    expect(cut.ms, `${cut.sent} bytes in ${Math.round(cut.ms)} ms`).toBeLessThan(DISCARD_MS + 5000);
    expect(answeredCode(cut.answer)).toBe('unauthorized');
  });
});
