/**
 * `GET /v1/catalog` of a scope with 1,000 environments under load: wrk (Debian's `wrk`; `apt-get install -y wrk`)
 * with 2 threads and 32 connections for 10 s against the gateway over the real runtime, and against a raw node:http
 * server answering JSON.stringify of the same catalog held in memory (the least any server must do per request).
 * Value and baseline are requests/s; target: the gateway keeps at least half the raw rate.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { caller, startBenchGateway } from './bench-gateway.ts';
import { figure } from './figure.ts';

const ENVIRONMENTS = Number(process.env.BENCH_ENVIRONMENTS ?? 1000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

/** Runs wrk in its own process (asynchronously: the servers under test live in this one). */
async function wrk(url: string, headers: Record<string, string>): Promise<{ rps: number; errors: number }> {
  const args = ['-t2', '-c32', `-d${SECONDS}s`, '--latency', ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), url];
  const { stdout: out } = await promisify(execFile)('wrk', args, { encoding: 'utf8' });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const errors = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  if (!Number.isFinite(rps)) throw new Error(`wrk printed no rate:\n${out}`);
  process.stderr.write(out);
  return { rps, errors };
}

try {
  execFileSync('wrk', ['--version'], { stdio: 'ignore' });
} catch (error) {
  // wrk prints its version and exits 1; only a missing binary is a problem.
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('wrk is missing: apt-get install -y wrk');
}

const bed = await startBenchGateway();
try {
  const started = performance.now();
  for (let i = 0; i < ENVIRONMENTS; i++) {
    await bed.berth.api.createEnvironment(caller, { name: `catalog bench ${i}`, profile: { provider: 'native', idleSeconds: 600 } });
  }
  process.stderr.write(`catalog-load: created ${ENVIRONMENTS} environments in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  const catalog = await bed.berth.api.catalog(caller);
  if (catalog.length !== ENVIRONMENTS) throw new Error(`catalog lists ${catalog.length} environments, not ${ENVIRONMENTS}`);

  const raw = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(catalog));
  });
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
  const baseline = await wrk(`http://127.0.0.1:${(raw.address() as AddressInfo).port}/v1/catalog`, {});
  raw.close();

  // Where the time goes: the same raw server asking the runtime API on every request (no gateway in between).
  const direct = http.createServer(async (_req, res) => {
    const body = JSON.stringify(await bed.berth.api.catalog(caller));
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(body);
  });
  await new Promise<void>((resolve) => direct.listen(0, '127.0.0.1', resolve));
  const runtimeOnly = await wrk(`http://127.0.0.1:${(direct.address() as AddressInfo).port}/v1/catalog`, {});
  direct.close();

  const gateway = await wrk(`${bed.url}/v1/catalog`, { authorization: bed.headers.authorization! });
  if (gateway.errors > 0) throw new Error(`${gateway.errors} gateway answers were not 2xx`);
  const bytes = Buffer.byteLength(JSON.stringify(catalog));
  process.stderr.write(`catalog-load: ${(bytes / 1024).toFixed(0)} KiB per answer; gateway ${gateway.rps} req/s, raw node:http over the runtime API ${runtimeOnly.rps} req/s, raw node:http with the JSON in memory ${baseline.rps} req/s\n`);
  figure('catalog-load', gateway.rps, 'requests/s', baseline.rps, { op: '>=', ratio: 0.5 });
} finally {
  await bed.close();
}
