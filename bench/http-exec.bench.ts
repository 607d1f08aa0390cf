/**
 * One native `true` through the HTTP API (POST /v1/executions, then GET /v1/executions/{id}?waitMs= until terminal)
 * against the same through the in-process runtime API (submitExecution, then getExecution with the same wait), on one
 * runtime, alternating. Value and baseline are median milliseconds per command; target: HTTP within 1.5x.
 */
import { caller, startBenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 60);
const WARMUP = 5;
const terminal = new Set(['exited', 'cancelled', 'failed', 'unknown']);

const bed = await startBenchGateway();
const { api } = bed.berth;
try {
  const env = await api.createEnvironment(caller, { name: 'bench http exec' });
  await api.acquire(caller, env.id); // both paths run on a ready allocation

  let n = 0;
  const inProcess = async (): Promise<number> => {
    const started = performance.now();
    let record = await api.submitExecution(caller, { operationId: `direct-${n++}`, environment: env.id, command: ['true'] });
    while (!terminal.has(record.status)) record = await api.getExecution(caller, record.id, 10_000);
    if (record.exitCode !== 0) throw new Error(`in-process: ${JSON.stringify(record)}`);
    return performance.now() - started;
  };
  const overHttp = async (): Promise<number> => {
    const started = performance.now();
    const body = JSON.stringify({ operationId: `http-${n++}`, environment: env.id, command: ['true'] });
    const submitted = await fetch(`${bed.url}/v1/executions`, { method: 'POST', headers: bed.headers, body });
    let record = (await submitted.json()) as { id: string; status: string; exitCode?: number };
    while (!terminal.has(record.status)) {
      record = await (await fetch(`${bed.url}/v1/executions/${record.id}?waitMs=10000`, { headers: bed.headers })).json();
    }
    if (record.exitCode !== 0) throw new Error(`http: ${JSON.stringify(record)}`);
    return performance.now() - started;
  };

  for (let i = 0; i < WARMUP; i++) {
    await inProcess();
    await overHttp();
  }
  const direct: number[] = [];
  const http: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    direct.push(await inProcess());
    http.push(await overHttp());
  }
  console.error(`http-exec: HTTP median ${median(http).toFixed(1)} ms, in-process ${median(direct).toFixed(1)} ms over ${RUNS} runs each`);
  figure('http-exec', median(http), 'ms/command', median(direct), { op: '<=', ratio: 1.5 });
} finally {
  await bed.close();
}
