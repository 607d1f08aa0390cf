/**
 * `sandbox.run('true')` through the client (submit, then follow over the WebSocket into `{stdout, stderr, exitCode}`)
 * against the same through raw fetch calls (POST /v1/executions in the sandbox's lease and turn, GET the record with
 * `waitMs` until terminal, GET both output streams), on one sandbox, alternating. Value and baseline are median
 * milliseconds per command; target: the client within 1.2x of raw fetch.
 */
import { Berth } from '../src/client/index.ts';
import { startBenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 60);
const WARMUP = 5;
const terminal = new Set(['exited', 'cancelled', 'failed', 'unknown']);

const bed = await startBenchGateway();
try {
  const berth = await Berth.connect({ url: bed.url, token: bed.headers.authorization!.replace(/^Bearer /, '') });
  const sandbox = await berth.sandboxes.create();

  const client = async (): Promise<number> => {
    const started = performance.now();
    const result = await sandbox.run('true');
    if (result.exitCode !== 0) throw new Error(`client: ${JSON.stringify(result.record)}`);
    return performance.now() - started;
  };
  let n = 0;
  const rawFetch = async (): Promise<number> => {
    const started = performance.now();
    const body = JSON.stringify({ operationId: `raw-${n++}`, lease: sandbox.name, turn: sandbox.turn.id, command: 'true' });
    let record = (await (await fetch(`${bed.url}/v1/executions`, { method: 'POST', headers: bed.headers, body })).json()) as { id: string; status: string; exitCode?: number };
    while (!terminal.has(record.status)) {
      record = await (await fetch(`${bed.url}/v1/executions/${record.id}?waitMs=10000`, { headers: bed.headers })).json();
    }
    const output = (stream: string) => fetch(`${bed.url}/v1/executions/${record.id}/output?stream=${stream}`, { headers: bed.headers }).then((r) => r.arrayBuffer());
    await Promise.all([output('stdout'), output('stderr')]);
    if (record.exitCode !== 0) throw new Error(`raw: ${JSON.stringify(record)}`);
    return performance.now() - started;
  };

  for (let i = 0; i < WARMUP; i++) {
    await client();
    await rawFetch();
  }
  const viaClient: number[] = [];
  const viaFetch: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    viaClient.push(await client());
    viaFetch.push(await rawFetch());
  }
  await sandbox.kill();
  console.error(`sdk: client median ${median(viaClient).toFixed(1)} ms, raw fetch ${median(viaFetch).toFixed(1)} ms over ${RUNS} runs each`);
  figure('sdk', median(viaClient), 'ms/command', median(viaFetch), { op: '<=', ratio: 1.2 });
} finally {
  await bed.close();
}
