/**
 * `GET /v1/catalog?limit=1000` (one page, the largest) of a scope with 1,000 environments under load: autocannon (the npm load generator, a
 * devDependency, so a fresh clone needs nothing else) with 32 connections for 5 s against the gateway over the real
 * runtime, and against a raw node:http server answering JSON.stringify of the same catalog held in memory (the least
 * any server must do per request). The servers take turns for 5 rounds (the machine is shared: a burst of other work
 * then hits every server alike); value and baseline are the medians, in requests/s. Target: the gateway keeps at
 * least half the raw rate.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PAGE_LIMIT_MAX } from '../schemas/api.ts';
import { caller, startBenchGateway } from './bench-gateway.ts';
import { figure, median } from './figure.ts';

const ENVIRONMENTS = Number(process.env.BENCH_ENVIRONMENTS ?? 1000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const autocannonCli = createRequire(import.meta.url).resolve('autocannon');

/**
 * Runs autocannon in its own node process (asynchronously: the servers under test live in this one, and a load
 * generator sharing their event loop would take its time from them). Answers the rate of 2xx answers.
 */
async function load(url: string, headers: Record<string, string>): Promise<{ rps: number; failures: number }> {
  const args = [autocannonCli, '--json', '-c', '32', '-d', String(SECONDS), ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}=${v}`]), url];
  const { stdout } = await promisify(execFile)(process.execPath, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  const result = JSON.parse(stdout) as { duration: number; '2xx': number; non2xx: number; errors: number; timeouts: number };
  if (process.env.BENCH_VERBOSE) process.stderr.write(`${stdout}\n`);
  if (!(result.duration > 0) || !Number.isFinite(result['2xx'])) throw new Error(`autocannon printed no rate:\n${stdout}`);
  return { rps: result['2xx'] / result.duration, failures: result.non2xx + result.errors + result.timeouts };
}

const bed = await startBenchGateway();
try {
  const started = performance.now();
  for (let i = 0; i < ENVIRONMENTS; i++) {
    await bed.berth.api.createEnvironment(caller, { name: `catalog bench ${i}`, profile: { provider: 'native', idleSeconds: 600 } });
  }
  process.stderr.write(`catalog-load: created ${ENVIRONMENTS} environments in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  const catalog = (await bed.berth.api.catalog(caller, { limit: PAGE_LIMIT_MAX })).items;
  if (catalog.length !== ENVIRONMENTS) throw new Error(`catalog lists ${catalog.length} environments, not ${ENVIRONMENTS}`);

  const raw = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(catalog));
  });
  // Where the time goes: the same raw server asking the runtime API on every request (no gateway in between).
  const direct = http.createServer(async (_req, res) => {
    const body = JSON.stringify((await bed.berth.api.catalog(caller, { limit: PAGE_LIMIT_MAX })).items);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(body);
  });
  const urlOf = async (server: http.Server): Promise<string> => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/catalog`;
  };
  const [rawUrl, directUrl] = [await urlOf(raw), await urlOf(direct)];
  // The servers must answer the same bytes, or the rates compare different work.
  const answered = await (await fetch(`${bed.url}/v1/catalog?limit=${PAGE_LIMIT_MAX}`, { headers: bed.headers })).text();
  if (answered !== JSON.stringify(catalog)) throw new Error('the gateway answers another catalog than the runtime API');
  const rates = { raw: [] as number[], direct: [] as number[], gateway: [] as number[] };
  for (let round = 1; round <= ROUNDS; round++) {
    const measured = { raw: await load(rawUrl, {}), direct: await load(directUrl, {}), gateway: await load(`${bed.url}/v1/catalog?limit=${PAGE_LIMIT_MAX}`, { authorization: bed.headers.authorization! }) };
    for (const [server, { rps, failures }] of Object.entries(measured)) {
      // A failed request costs a server less than an answer: any would flatter its rate.
      if (failures > 0) throw new Error(`${failures} ${server} requests failed or were not 2xx`);
      rates[server as keyof typeof rates].push(rps);
    }
    process.stderr.write(`catalog-load: round ${round}: gateway ${measured.gateway.rps.toFixed(1)} req/s, raw ${measured.raw.rps.toFixed(1)} req/s (ratio ${(measured.gateway.rps / measured.raw.rps).toFixed(2)})\n`);
  }
  raw.close();
  direct.close();
  const bytes = Buffer.byteLength(JSON.stringify(catalog));
  const [gateway, runtimeOnly, baseline] = [median(rates.gateway), median(rates.direct), median(rates.raw)];
  process.stderr.write(`catalog-load: ${(bytes / 1024).toFixed(0)} KiB per answer; medians: gateway ${gateway} req/s, raw node:http over the runtime API ${runtimeOnly} req/s, raw node:http with the JSON in memory ${baseline} req/s\n`);
  figure('catalog-load', gateway, 'requests/s', baseline, { op: '>=', ratio: 0.5 });
} finally {
  await bed.close();
}
