/**
 * Turn file tools over HTTP (GET and PUT /v1/sessions/{id}/turns/{turnId}/files?path=, one open turn on a managed
 * workspace of a real `berth serve` child) against raw fs readFile and writeFile of the same bytes in this process on
 * the same disk, in alternating blocks, for 4 KiB and 4 MiB. The figures are an agent's usual cycle on 4 MiB files:
 * read a file written earlier, then write it back changed (target within 3x of raw). The client is the SDK's
 * (`berth.turns.files`), which reads a body straight into one buffer and sends one from memory over kept-alive
 * plain HTTP (src/client/direct-http.ts). A file rewritten and read back at once, the 4 KiB medians (which the
 * per-request cost dominates; the issue sets them no target), the floor any HTTP tool has (the same bytes through a
 * bare node:http server in a child process, with the same client) and the same reads through node:http's client are
 * reported on stderr.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { open, readFile, writeFile } from 'node:fs/promises';
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Berth } from '../src/client/berth-client.ts';
import { DirectHttp } from '../src/client/direct-http.ts';
import { startBerthServe } from './berth-serve.ts';
import { figure, median } from './figure.ts';

const TARGET = 3;
const SIZES = [
  { name: '4KiB', bytes: 4 * 1024, runs: Number(process.env.BENCH_RUNS_SMALL ?? 300) },
  { name: '4MiB', bytes: 4 * 1024 * 1024, runs: Number(process.env.BENCH_RUNS_LARGE ?? 40) },
];
const WARMUP = 5;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Past the 2 s after which a file's version is remembered by its identity and times where ctimes are coarse. */
const SETTLE_MS = 2_500;

/** node:http's client, kept alive and without Nagle (as curl's and fetch's), for the comparison on stderr. */
const agent = new Agent({ keepAlive: true, maxSockets: 1, noDelay: true });

async function getByNodeHttp(url: string, headers: Record<string, string>, bytes: number): Promise<void> {
  const body = await new Promise<Buffer>((resolve, reject) => {
    request(url, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
  if (body.length !== bytes) throw new Error(`node:http GET: ${body.length} bytes`);
}

const direct = new DirectHttp();

/** A node:http server that only answers GET with `bytes` bytes and drains PUT bodies, in a child process as Berth is. */
const BARE_SERVER = `
const data = require('node:crypto').randomBytes(Number(process.argv[1]));
const server = require('node:http').createServer((req, res) => {
  if (req.method === 'GET') return res.end(data);
  req.resume();
  req.on('end', () => res.end('{}'));
});
server.listen(0, '127.0.0.1', () => process.send(server.address().port));`;

/** Medians of GET and PUT of `data` against the bare server, with the SDK's client. */
async function bareHttp(data: Buffer, runs: number): Promise<{ get: number; put: number }> {
  const child = fork('-e', [BARE_SERVER, String(data.length)], { execArgv: [], stdio: 'ignore' } as never);
  child.on('error', () => undefined);
  const [port] = (await once(child, 'message')) as [number];
  const url = new URL(`http://127.0.0.1:${port}/`);
  const ms = { get: [] as number[], put: [] as number[] };
  try {
    for (let i = 0; i < WARMUP + runs; i++) {
      let started = performance.now();
      const got = await direct.request('GET', url, {}, undefined, data.length);
      const get = performance.now() - started;
      if (got?.body.length !== data.length) throw new Error(`bare GET: ${got?.body.length} bytes`);
      started = performance.now();
      await direct.request('PUT', url, {}, data, 1024);
      const put = performance.now() - started;
      if (i < WARMUP) continue;
      ms.get.push(get);
      ms.put.push(put);
    }
  } finally {
    child.kill();
  }
  return { get: median(ms.get), put: median(ms.put) };
}

type Op = 'httpRead' | 'rawRead' | 'httpWrite' | 'rawWrite';

const TOKEN = 'bench-files-admin-token-0123456789';
const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-files-'));
/** Where the raw baselines read and write: the same filesystem as the data directory. */
const rawDir = mkdtempSync(join(tmpdir(), 'berth-bench-raw-'));
const server = await startBerthServe(dataDir, TOKEN);
try {
  const berth = await Berth.connect({ url: server.url, token: TOKEN });
  const workspace = await berth.workspaces.create({ name: 'bench' });
  const session = await berth.sessions.create({ workspaceId: workspace.id });
  const turn = await berth.turns.open(session.id);
  const tools = berth.turns.files(session.id, turn.id);
  const files = `${server.url}/v1/sessions/${session.id}/turns/${turn.id}/files`;

  const timed = async (run: () => Promise<void>): Promise<number> => {
    const started = performance.now();
    await run();
    return performance.now() - started;
  };
  const put = async (path: string, data: Buffer) => {
    await tools.write(path, data);
  };
  const get = async (path: string, bytes: number) => {
    const got = await tools.read(path);
    if (got.data.length !== bytes) throw new Error(`GET: ${got.data.length} bytes`);
  };
  const writeDurably = async (path: string, data: Buffer) => {
    const file = await open(path, 'w');
    try {
      await file.write(data);
      await file.datasync();
    } finally {
      await file.close();
    }
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
    const rawPaths = names.map((name) => join(rawDir, name));
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
    console.error(`workspace-files ${size.name}, ${size.runs} runs, one file rewritten and read back at once: ${line(medians(fresh))}`);
    if (size.name === '4MiB') {
      const durable: number[] = [];
      for (const path of rawPaths.slice(WARMUP)) durable.push(await timed(() => writeDurably(path, data)));
      console.error(
        `workspace-files 4MiB: a durable raw write (writeFile then fdatasync) takes ${median(durable).toFixed(3)} ms; Berth's write is x${(m.httpWrite / median(durable)).toFixed(2)} that ` +
          '(Berth swaps a file in rather than renaming it over the old one, whose bytes ext4 would write out before the history commit)',
      );
      const byNodeHttp: number[] = [];
      for (const name of names) byNodeHttp.push(await timed(() => getByNodeHttp(`${files}?path=${name}`, { authorization: `Bearer ${TOKEN}` }, size.bytes)));
      console.error(`workspace-files 4MiB: the same reads through node:http's client take ${median(byNodeHttp.slice(WARMUP)).toFixed(3)} ms`);
      const floor = await bareHttp(data, size.runs);
      console.error(
        `workspace-files 4MiB over a bare node:http server on loopback, same client: GET ${floor.get.toFixed(3)} ms (Berth x${(m.httpRead / floor.get).toFixed(2)}), ` +
          `PUT ${floor.put.toFixed(3)} ms (Berth x${(m.httpWrite / floor.put).toFixed(2)}); the floor alone is x${(floor.get / m.rawRead).toFixed(2)} / x${(floor.put / m.rawWrite).toFixed(2)} raw fs`,
      );
      figure('workspace-file-read-4MiB-http', m.httpRead, 'ms', m.rawRead, { op: '<=', ratio: TARGET });
      figure('workspace-file-write-4MiB-http', m.httpWrite, 'ms', m.rawWrite, { op: '<=', ratio: TARGET });
    }
  }
  await berth.turns.release(session.id, turn.id);
} finally {
  agent.destroy();
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(rawDir, { recursive: true, force: true });
}
