/**
 * One native `true` through the HTTP API (POST /v1/executions, then GET /v1/executions/{id}?waitMs= until terminal)
 * against the same through the in-process runtime API (submitExecution, then getExecution with the same wait), on one
 * runtime, alternating. Value and baseline are median milliseconds per command; target: HTTP within 1.5x. The HTTP
 * calls go through Berth's client (its transport's JSON requests, as every client call makes them); the same calls by
 * fetch are reported on stderr beside them: fetch spends about 0.5 ms more of this process's CPU per request, where
 * the server's own part of a request is about 0.15 ms.
 */
import { HttpTransport } from '../src/client/http-transport.ts';
import { caller, startBenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 60);
const WARMUP = 5;
const terminal = new Set(['exited', 'cancelled', 'failed', 'unknown']);

interface Outcome {
  id: string;
  status: string;
  exitCode?: number | null;
}

const bed = await startBenchGateway();
const { api } = bed.berth;
try {
  const env = await api.createEnvironment(caller, { name: 'bench http exec' });
  await api.acquire(caller, env.id); // every path runs on a ready allocation
  const transport = new HttpTransport(bed.url, bed.headers.authorization!.replace(/^Bearer /, ''));

  let n = 0;
  const timed = async (run: () => Promise<Outcome>): Promise<number> => {
    const started = performance.now();
    const record = await run();
    if (record.exitCode !== 0) throw new Error(`not exited 0: ${JSON.stringify(record)}`);
    return performance.now() - started;
  };
  const inProcess = async (): Promise<Outcome> => {
    let record = await api.submitExecution(caller, { operationId: `direct-${n++}`, environment: env.id, command: ['true'] });
    while (!terminal.has(record.status)) record = await api.getExecution(caller, record.id, 10_000);
    return record;
  };
  const byClient = async (): Promise<Outcome> => {
    const body = { operationId: `client-${n++}`, environment: env.id, command: ['true'] };
    let record = await transport.json<Outcome>('POST', '/v1/executions', { body });
    while (!terminal.has(record.status)) record = await transport.json<Outcome>('GET', `/v1/executions/${record.id}`, { query: { waitMs: 10_000 } });
    return record;
  };
  const byFetch = async (): Promise<Outcome> => {
    const body = JSON.stringify({ operationId: `fetch-${n++}`, environment: env.id, command: ['true'] });
    let record = (await (await fetch(`${bed.url}/v1/executions`, { method: 'POST', headers: bed.headers, body })).json()) as Outcome;
    while (!terminal.has(record.status)) {
      record = (await (await fetch(`${bed.url}/v1/executions/${record.id}?waitMs=10000`, { headers: bed.headers })).json()) as Outcome;
    }
    return record;
  };

  const ms = { direct: [] as number[], client: [] as number[], fetch: [] as number[] };
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const direct = await timed(inProcess);
    const client = await timed(byClient);
    const fetched = await timed(byFetch);
    if (i < WARMUP) continue;
    ms.direct.push(direct);
    ms.client.push(client);
    ms.fetch.push(fetched);
  }
  const [direct, client, fetched] = [median(ms.direct), median(ms.client), median(ms.fetch)];
  console.error(
    `http-exec: in-process ${direct.toFixed(1)} ms, HTTP by Berth's client ${client.toFixed(1)} ms (x${(client / direct).toFixed(2)}), ` +
      `HTTP by fetch ${fetched.toFixed(1)} ms (x${(fetched / direct).toFixed(2)}), medians of ${RUNS} runs each`,
  );
  figure('http-exec', client, 'ms/command', direct, { op: '<=', ratio: 1.5 });
} finally {
  await bed.close();
}
