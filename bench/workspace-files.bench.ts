/**
 * Turn file tools over HTTP (GET and PUT /v1/sessions/{id}/turns/{turnId}/files?path=, one open turn on a managed
 * workspace) against raw fs readFile and writeFile of the same bytes in this process on the same disk, in alternating
 * blocks, for 4 KiB and 4 MiB. The figures are an agent's usual cycle on 4 MiB files: read a file written earlier,
 * then write it back changed (target within 3x of raw). A file rewritten and read back within 2 s has no remembered
 * version (file-stamp.ts), so its old and new bytes are hashed on every call: that case and the 4 KiB medians, which
 * the per-request cost dominates and the issue sets no target for, are reported on stderr, with the floor any HTTP
 * tool has: the same bytes through a bare node:http server on loopback, fetched the same way.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { caller } from './bench-gateway.ts';
import { figure, median } from './figure.ts';
import { startWorkspaceBed } from './workspace-bed.ts';

const TARGET = 3;
const SIZES = [
  { name: '4KiB', bytes: 4 * 1024, runs: Number(process.env.BENCH_RUNS_SMALL ?? 300) },
  { name: '4MiB', bytes: 4 * 1024 * 1024, runs: Number(process.env.BENCH_RUNS_LARGE ?? 40) },
];
const WARMUP = 5;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Past the 2 s after which a file's version is remembered by its identity and times. */
const SETTLE_MS = 2_500;

/** Medians of GET and PUT of `data` against a node:http server that only sends it or drains the body. */
async function bareHttp(data: Buffer, runs: number): Promise<{ get: number; put: number }> {
  const server = createServer((req, res) => {
    if (req.method === 'GET') return res.end(data);
    req.resume();
    req.on('end', () => res.end('{}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const ms = { get: [] as number[], put: [] as number[] };
  try {
    for (let i = 0; i < WARMUP + runs; i++) {
      let started = performance.now();
      await (await fetch(url)).arrayBuffer();
      const get = performance.now() - started;
      started = performance.now();
      await (await fetch(url, { method: 'PUT', body: data as BodyInit })).arrayBuffer();
      const put = performance.now() - started;
      if (i < WARMUP) continue;
      ms.get.push(get);
      ms.put.push(put);
    }
  } finally {
    server.close();
  }
  return { get: median(ms.get), put: median(ms.put) };
}

type Op = 'httpRead' | 'rawRead' | 'httpWrite' | 'rawWrite';

const bed = await startWorkspaceBed();
try {
  const [session] = await bed.sessions(1);
  const turn = await bed.berth.api.openTurn(caller, session!);
  const files = `${bed.url}/v1/sessions/${session}/turns/${turn.id}/files`;
  const headers = { authorization: bed.headers.authorization!, 'content-type': 'application/octet-stream' };

  const timed = async (run: () => Promise<void>): Promise<number> => {
    const started = performance.now();
    await run();
    return performance.now() - started;
  };
  const put = async (path: string, data: Buffer) => {
    const res = await fetch(`${files}?path=${path}`, { method: 'PUT', headers, body: data as BodyInit });
    if (res.status !== 200) throw new Error(`PUT ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  const get = async (path: string, bytes: number) => {
    const res = await fetch(`${files}?path=${path}`, { headers });
    const body = await res.arrayBuffer();
    if (res.status !== 200 || body.byteLength !== bytes) throw new Error(`GET ${res.status}: ${body.byteLength} bytes`);
  };
  const rawRead = async (path: string, bytes: number) => {
    if ((await readFile(path)).length !== bytes) throw new Error('raw read short');
  };
  /**
   * Reads then writes each of `paths` by one way, answering the times (after the warm-up). Raw and HTTP run in
   * blocks of their own, not call by call: the garbage of a 4 MiB HTTP call is collected at some later allocation,
   * and would otherwise land on the raw call after it.
   */
  const block = async (paths: string[], data: Buffer, bytes: number, way: 'raw' | 'http', into: Record<Op, number[]>) => {
    for (const [i, path] of paths.entries()) {
      data[1] = i & 0xff; // each write changes the file, as an agent's would
      const read = await timed(() => (way === 'raw' ? rawRead(path, bytes) : get(path, bytes)));
      const write = await timed(() => (way === 'raw' ? writeFile(path, data) : put(path, data)));
      if (i < WARMUP) continue;
      into[way === 'raw' ? 'rawRead' : 'httpRead'].push(read);
      into[way === 'raw' ? 'rawWrite' : 'httpWrite'].push(write);
    }
  };
  const samples = (): Record<Op, number[]> => ({ httpRead: [], rawRead: [], httpWrite: [], rawWrite: [] });
  const medians = (ms: Record<Op, number[]>) => Object.fromEntries(Object.entries(ms).map(([op, v]) => [op, median(v)])) as Record<Op, number>;
  const line = (m: Record<Op, number>) =>
    `read HTTP ${m.httpRead.toFixed(3)} ms vs raw ${m.rawRead.toFixed(3)} ms (x${(m.httpRead / m.rawRead).toFixed(2)}), ` +
    `write HTTP ${m.httpWrite.toFixed(3)} ms vs raw ${m.rawWrite.toFixed(3)} ms (x${(m.httpWrite / m.rawWrite).toFixed(2)})`;

  for (const size of SIZES) {
    const count = WARMUP + size.runs;
    const data = randomBytes(size.bytes);
    const names = Array.from({ length: count }, (_, i) => `${size.name}-${i}.bin`);
    const rawPaths = names.map((name) => join(bed.rawDir, name));
    for (let i = 0; i < count; i++) {
      await put(names[i]!, data);
      await writeFile(rawPaths[i]!, data);
    }
    // Rounds of one raw block then one HTTP block, each file written before the round began (settled).
    const usual = samples();
    for (let round = 0; round < ROUNDS; round++) {
      await sleep(SETTLE_MS);
      await block(rawPaths, data, size.bytes, 'raw', usual);
      await block(names, data, size.bytes, 'http', usual);
    }
    const fresh = samples();
    await block(rawPaths.map(() => rawPaths[0]!), data, size.bytes, 'raw', fresh);
    await block(names.map(() => names[0]!), data, size.bytes, 'http', fresh);
    const m = medians(usual);
    console.error(`workspace-files ${size.name}, ${ROUNDS}x${size.runs} runs, a file written earlier: ${line(m)}`);
    console.error(`workspace-files ${size.name}, ${size.runs} runs, one file rewritten at once (hashed twice a call): ${line(medians(fresh))}`);
    if (size.name === '4MiB') {
      const floor = await bareHttp(data, size.runs);
      console.error(`workspace-files 4MiB over a bare node:http server on loopback: GET ${floor.get.toFixed(3)} ms, PUT ${floor.put.toFixed(3)} ms`);
      figure('workspace-file-read-4MiB-http', m.httpRead, 'ms', m.rawRead, { op: '<=', ratio: TARGET });
      figure('workspace-file-write-4MiB-http', m.httpWrite, 'ms', m.rawWrite, { op: '<=', ratio: TARGET });
    }
  }
  await bed.berth.api.releaseTurn(caller, session!, turn.id);
} finally {
  await bed.close();
}
