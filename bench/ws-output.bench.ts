/**
 * Output over the execution WebSocket from the real runtime: a native command writes 256 MiB to stdout and a `ws`
 * client reads the DESIGN §8 frames through the gateway, against a raw `ws` server on loopback sending the same
 * number of bytes in the same chunk size with the same send-buffer pacing, each timed to its last byte. Two figures:
 * `ws-output` follows the command live (from submit to the last byte: the command's start, the spool, the runtime's
 * reads and the gateway, alongside the runtime saving the output as soon as the command exits), and
 * `ws-output-saved` reads the same output again once it is saved (the gateway and artifact reads alone). How long
 * the live close (after the terminal status, which waits for the save) trails the last byte is printed too.
 * The command writes 64 KiB at a time, so it is not what is measured: `head -c` writes 4 KiB at a time and took
 * longer to write 256 MiB to a file on its own (230 ms here) than the raw baseline took to send it all (180 ms). Its
 * time alone, writing to a file on the same disk, is printed beside the figures.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { defaultLimits } from '../src/gateway/limits.ts';
import { startBenchGateway, type BenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const BYTES = Number(process.env.BENCH_WS_BYTES ?? 256 * 1024 * 1024);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const CHUNK = defaultLimits.chunkBytes;
const WRITE_BYTES = 64 * 1024;
const COMMAND = ['dd', 'if=/dev/zero', `bs=${WRITE_BYTES}`, `count=${BYTES}`, 'iflag=count_bytes', 'status=none'];
const mibPerSecond = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);

/**
 * Reads until close; returns the payload bytes received (minus `headerBytes` per frame), when the last one came
 * (performance.now()) and the close code.
 */
function read(url: string, headerBytes: number, headers: Record<string, string> = {}): Promise<{ bytes: number; lastAt: number; code: number }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    let lastAt = 0;
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) return;
      bytes += data.length - headerBytes;
      lastAt = performance.now();
    });
    ws.on('close', (code) => resolve({ bytes, lastAt, code }));
    ws.on('error', reject);
  });
}

async function rawRun(data: Buffer): Promise<number> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise((resolve) => wss.once('listening', resolve));
  wss.on('connection', async (ws) => {
    // The same pacing a careful sender needs: wait for the socket when the buffer grows.
    for (let offset = 0; offset < data.length; offset += CHUNK) {
      ws.send(data.subarray(offset, offset + CHUNK));
      while (ws.bufferedAmount > defaultLimits.streamBufferBytes) await new Promise((r) => setTimeout(r, 1));
    }
    ws.close(1000);
  });
  const started = performance.now();
  const { bytes, lastAt } = await read(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, 0);
  wss.close();
  if (bytes !== data.length) throw new Error(`raw: received ${bytes} of ${data.length}`);
  return mibPerSecond(bytes, lastAt - started);
}

interface GatewayRun {
  /** MiB/s from submit to the last byte, and from the first read of the saved output to its last byte. */
  live: number;
  saved: number;
  /** From the last byte to the close that follows the terminal status: the save (once followed live). */
  liveCloseMs: number;
}

/** The command alone, its output to a file in the temporary directory (where the bench's data directory is), in ms. */
function commandAlone(): number {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-ws-'));
  const out = openSync(join(dir, 'out'), 'w');
  try {
    const started = performance.now();
    execFileSync(COMMAND[0]!, COMMAND.slice(1), { stdio: ['ignore', out, 'inherit'] });
    return performance.now() - started;
  } finally {
    closeSync(out);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Submits the command, follows it live, then reads the saved output again. */
async function gatewayRun(bed: BenchGateway, env: string, run: number): Promise<GatewayRun> {
  const stream = async (id: string) => {
    const { bytes, lastAt, code } = await read(`${bed.url.replace('http', 'ws')}/v1/executions/${id}/stream`, 9, bed.headers);
    if (bytes !== BYTES || code !== 1000) throw new Error(`gateway: received ${bytes} of ${BYTES}, close ${code}`);
    return { lastAt, closedAt: performance.now() };
  };
  const body = JSON.stringify({ operationId: `ws-bench-${run}`, environment: env, command: COMMAND });
  const started = performance.now();
  const exec = (await (await fetch(`${bed.url}/v1/executions`, { method: 'POST', headers: bed.headers, body })).json()) as { id: string };
  const live = await stream(exec.id);
  const again = performance.now();
  const saved = await stream(exec.id);
  return {
    live: mibPerSecond(BYTES, live.lastAt - started),
    saved: mibPerSecond(BYTES, saved.lastAt - again),
    liveCloseMs: live.closedAt - live.lastAt,
  };
}

const bed = await startBenchGateway();
try {
  const env = (await (await fetch(`${bed.url}/v1/environments`, { method: 'POST', headers: bed.headers, body: '{"name":"ws bench"}' })).json()) as {
    id: string;
  };
  const data = Buffer.alloc(BYTES);
  const raw: number[] = [];
  const live: number[] = [];
  const saved: number[] = [];
  const closeMs: number[] = [];
  const alone: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    alone.push(commandAlone());
    raw.push(await rawRun(data));
    const r = await gatewayRun(bed, env.id, run);
    live.push(r.live);
    saved.push(r.saved);
    closeMs.push(r.liveCloseMs);
  }
  const show = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ');
  console.error(`ws-output: live ${show(live)} MiB/s; saved ${show(saved)} MiB/s; raw ws ${show(raw)} MiB/s`);
  console.error(`ws-output: the command alone writes the output to a file in ${show(alone)} ms (${BYTES} bytes, ${WRITE_BYTES} a write)`);
  console.error(`ws-output: live, last byte to close (terminal status once saved) ${show(closeMs)} ms`);
  figure('ws-output', median(live), 'MiB/s', median(raw), { op: '>=', ratio: 0.5 });
  figure('ws-output-saved', median(saved), 'MiB/s', median(raw), { op: '>=', ratio: 0.5 });
} finally {
  await bed.close();
}
