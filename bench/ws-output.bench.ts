/**
 * Output over the execution WebSocket from the real runtime: a native command writes 256 MiB to stdout and a `ws`
 * client reads the DESIGN §8 frames through the gateway, against a raw `ws` server on loopback sending the same
 * number of bytes in the same chunk size with the same send-buffer pacing. Two figures: `ws-output` follows the
 * command live (from submit to the last byte: the spool, the runtime's reads and the gateway together), and
 * `ws-output-saved` reads the same output again once it is saved (the gateway and artifact reads alone).
 */
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { defaultLimits } from '../src/gateway/limits.ts';
import { startBenchGateway, type BenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const BYTES = Number(process.env.BENCH_WS_BYTES ?? 256 * 1024 * 1024);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CHUNK = defaultLimits.chunkBytes;
const mibPerSecond = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);

/** Reads until close; returns the payload bytes received (minus `headerBytes` per frame) and the close code. */
function read(url: string, headerBytes: number, headers: Record<string, string> = {}): Promise<{ bytes: number; code: number }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) bytes += data.length - headerBytes;
    });
    ws.on('close', (code) => resolve({ bytes, code }));
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
      while (ws.bufferedAmount > defaultLimits.wsBufferBytes) await new Promise((r) => setTimeout(r, 1));
    }
    ws.close(1000);
  });
  const started = performance.now();
  const { bytes } = await read(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, 0);
  const ms = performance.now() - started;
  wss.close();
  if (bytes !== data.length) throw new Error(`raw: received ${bytes} of ${data.length}`);
  return mibPerSecond(bytes, ms);
}

/** Submits the command, follows it live, then reads the saved output again; MiB/s of both. */
async function gatewayRun(bed: BenchGateway, env: string, run: number): Promise<{ live: number; saved: number }> {
  const stream = async (id: string) => {
    const { bytes, code } = await read(`${bed.url.replace('http', 'ws')}/v1/executions/${id}/stream`, 9, bed.headers);
    if (bytes !== BYTES || code !== 1000) throw new Error(`gateway: received ${bytes} of ${BYTES}, close ${code}`);
  };
  const body = JSON.stringify({ operationId: `ws-bench-${run}`, environment: env, command: ['head', '-c', String(BYTES), '/dev/zero'] });
  const started = performance.now();
  const exec = (await (await fetch(`${bed.url}/v1/executions`, { method: 'POST', headers: bed.headers, body })).json()) as { id: string };
  await stream(exec.id);
  const live = mibPerSecond(BYTES, performance.now() - started);
  const again = performance.now();
  await stream(exec.id);
  return { live, saved: mibPerSecond(BYTES, performance.now() - again) };
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
  for (let run = 0; run < RUNS; run++) {
    raw.push(await rawRun(data));
    const r = await gatewayRun(bed, env.id, run);
    live.push(r.live);
    saved.push(r.saved);
  }
  const show = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ');
  console.error(`ws-output: live ${show(live)} MiB/s; saved ${show(saved)} MiB/s; raw ws ${show(raw)} MiB/s`);
  figure('ws-output', median(live), 'MiB/s', median(raw), { op: '>=', ratio: 0.5 });
  figure('ws-output-saved', median(saved), 'MiB/s', median(raw), { op: '>=', ratio: 0.5 });
} finally {
  await bed.close();
}
