/**
 * Output delivery over the execution WebSocket: 256 MiB read by a raw `ws` client from the gateway (frames of
 * DESIGN §8, paced by the socket) against a raw `ws` server on loopback sending the same bytes in the same chunk
 * size. For now the gateway runs over the in-test FakeRuntimeApi (output already in memory), because the real runtime
 * is being written at the same time: the figure measures the gateway's framing and pacing, not the spool reads.
 */
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { buildGateway } from '../src/gateway/app.ts';
import { createTokenAuth } from '../src/gateway/auth.ts';
import { defaultLimits } from '../src/gateway/limits.ts';
import { listen } from '../src/gateway/listen.ts';
import { FakeRuntimeApi, expectedOutput } from '../test/unit/gateway/fake-runtime-api.ts';

const BYTES = Number(process.env.BENCH_WS_BYTES ?? 256 * 1024 * 1024);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CHUNK = defaultLimits.chunkBytes;
const TARGET = 0.5;
const token = 'bench-token-0123456789abcdef';

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
  const seconds = (performance.now() - started) / 1000;
  wss.close();
  if (bytes !== data.length) throw new Error(`raw: received ${bytes} of ${data.length}`);
  return bytes / 1024 / 1024 / seconds;
}

async function gatewayRun(): Promise<number> {
  const api = new FakeRuntimeApi();
  const gateway = buildGateway({ api, auth: createTokenAuth({ adminToken: token }) });
  const listener = await listen(gateway, { port: 0 });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  try {
    const env = (await (await fetch(`${listener.url}/v1/environments`, { method: 'POST', headers, body: '{"name":"bench"}' })).json()) as { id: string };
    const body = JSON.stringify({ operationId: 'bench', environment: env.id, command: ['emit', String(BYTES), '0', '0'] });
    const exec = (await (await fetch(`${listener.url}/v1/executions`, { method: 'POST', headers, body })).json()) as { id: string };
    await fetch(`${listener.url}/v1/executions/${exec.id}?waitMs=60000`, { headers }); // output fully produced first
    const started = performance.now();
    const { bytes, code } = await read(`${listener.url.replace('http', 'ws')}/v1/executions/${exec.id}/stream`, 9, headers);
    const seconds = (performance.now() - started) / 1000;
    if (bytes !== BYTES || code !== 1000) throw new Error(`gateway: received ${bytes} of ${BYTES}, close ${code}`);
    return bytes / 1024 / 1024 / seconds;
  } finally {
    await listener.close();
    await gateway.close();
  }
}

const data = expectedOutput('stdout', BYTES);
const raw: number[] = [];
const viaGateway: number[] = [];
for (let run = 0; run < RUNS; run++) {
  raw.push(await rawRun(data));
  viaGateway.push(await gatewayRun());
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const value = median(viaGateway);
const baseline = median(raw);
const ratio = value / baseline;
console.error(`ws-output: gateway ${viaGateway.map((x) => x.toFixed(0)).join(', ')} MiB/s; raw ${raw.map((x) => x.toFixed(0)).join(', ')} MiB/s`);
console.log(
  JSON.stringify({
    bench: 'ws-output',
    value: Number(value.toFixed(1)),
    unit: 'MiB/s',
    baseline: Number(baseline.toFixed(1)),
    ratio: Number(ratio.toFixed(3)),
    target: `>= ${TARGET}`,
    met: ratio >= TARGET,
  }),
);
