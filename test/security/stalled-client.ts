/**
 * A streaming client that stops reading, as an attacker holding server memory would: a raw TCP socket sends a
 * WebSocket upgrade or an SSE request, reads the status line, then pauses, so the server's writes pile up behind it.
 * Also the server-process probes the attacker specs measure with: resident memory and /healthz latency.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';

export interface StalledClient {
  /** The HTTP status the server answered (101 for an accepted upgrade, 200 for an event stream). */
  status: number;
  /** The status line and headers. */
  head: string;
  socket: net.Socket;
  /** Reads again and resolves with the bytes after the head once the server ends the connection. */
  drain(): Promise<Buffer>;
}

export type StreamKind = 'ws' | 'sse' | 'get';

/** Opens `path` on `url`'s server as a WebSocket upgrade, an SSE GET or a plain GET and stops reading once the head arrived. */
export function openStalled(url: string, path: string, kind: StreamKind, headers: Record<string, string> = {}): Promise<StalledClient> {
  const { hostname, port } = new URL(url);
  const lines = [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (kind === 'ws') lines.push('Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==');
  else if (kind === 'sse') lines.push('Accept: text/event-stream', 'Connection: close');
  else lines.push('Connection: close');
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    socket.once('error', reject);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.pause();
      socket.off('data', onData);
      const text = head.toString('latin1', 0, end);
      const rest: Buffer[] = [head.subarray(end + 4)];
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]),
        head: text,
        socket,
        drain: () =>
          new Promise((done) => {
            socket.on('data', (more: Buffer) => rest.push(more));
            socket.once('close', () => done(Buffer.concat(rest)));
            socket.resume();
          }),
      });
    };
    socket.on('data', onData);
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/** Resident memory of a process in bytes (VmRSS of /proc/<pid>/status). */
export function residentBytes(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib) * 1024;
}

/**
 * Runs `work` while sampling process `pid`'s resident memory every `everyMs`: answers its result, how far the memory
 * rose above where it was at the start (at its peak), and both figures for an assertion's message.
 */
export async function residentGrowth<T>(pid: number, work: () => Promise<T>, everyMs = 20): Promise<{ result: T; grown: number; label: string }> {
  const before = residentBytes(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, residentBytes(pid))), everyMs);
  try {
    const result = await work();
    peak = Math.max(peak, residentBytes(pid));
    return { result, grown: peak - before, label: `RSS ${before} -> peak ${peak}` };
  } finally {
    clearInterval(sampler);
  }
}

/** `count` plain GETs of `pathOf(i)` that stop reading after the head, then `settleMs` for the server to do what it does for them. */
export async function openStalledGets(url: string, count: number, pathOf: (i: number) => string, headers: Record<string, string>, settleMs: number): Promise<StalledClient[]> {
  const readers = await Promise.all(Array.from({ length: count }, (_, i) => openStalled(url, pathOf(i), 'get', headers)));
  await new Promise((r) => setTimeout(r, settleMs));
  return readers;
}

/** How long `GET /healthz` takes (ms), or Infinity when it does not answer 200 within `timeoutMs`. */
export async function healthLatency(url: string, timeoutMs: number): Promise<number> {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.arrayBuffer();
    return response.status === 200 ? performance.now() - started : Infinity;
  } catch {
    return Infinity;
  }
}
