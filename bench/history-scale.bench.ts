/**
 * Issue 12's bench at history scale: a real `berth serve` on a store holding the events of BENCH_HISTORY_EXECUTIONS
 * (default 1,000,000) finished executions (history-generator.ts), against the same server on an empty store in the
 * same run: RSS after start, start to /healthz, `GET /v1/executions?limit=100` p50 at the start, middle and end of
 * the list, and `true` end to end. The generated store (several GB at a million) is cached in the temporary
 * directory across runs, with a copy whose projections a real server caught up (one per version of the read models'
 * code); each run measures a copy of that. Remove `berth-bench-history-*` there to reclaim the space.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBerthServe, type BerthServe as Server } from './berth-serve.ts';
import { figure, median } from './figure.ts';
import { GENERATOR_VERSION, generateHistory, type GeneratedHistory } from './history-generator.ts';

const EXECUTIONS = Number(process.env.BENCH_HISTORY_EXECUTIONS ?? 1_000_000);
/** Server starts per side (alternating sides); start time and RSS are their medians. */
const STARTS = Number(process.env.BENCH_HISTORY_STARTS ?? 3);
const LIST_RUNS = 50;
/** A list sampled this long stops early (after one round at the least): unpaginated, 40,000 records took 47 s each. */
const LIST_BUDGET_MS = 90_000;
const TRUE_RUNS = 21;
const SETTLE_MS = 2_000;
/** Generous per-execution size for the disk check (measured: 6.8 KB per execution at a million; three copies are kept). */
const BYTES_PER_EXECUTION = 9_000;
const TOKEN = 'bench-history-admin-token-0123456789';
const bench = `history-scale-${EXECUTIONS}`;

const cacheDir = join(tmpdir(), `berth-bench-history-${EXECUTIONS}-v${GENERATOR_VERSION}`);
/** The generated store as the generator left it; each version of the read models' code catches up a copy of it. */
const generatedData = join(cacheDir, 'generated');
const log = (line: string) => process.stderr.write(`${line}\n`);
const seconds = (startMs: number) => ((performance.now() - startMs) / 1000).toFixed(1);

interface Generated {
  history: GeneratedHistory;
  eventsBytes: number;
  generationS: number;
}

interface CaughtUp {
  eventsBytes: number;
  catchUpS: number;
  rssMb: number;
}

const fileSize = (file: string): number => (existsSync(file) ? statSync(file).size : -1);

/** A cached directory's marker, when its store is the size the marker recorded and was closed cleanly. */
function intact<T extends { eventsBytes: number }>(dataDir: string): T | undefined {
  const markerFile = `${dataDir}.json`;
  if (!existsSync(markerFile)) return undefined;
  const marker = JSON.parse(readFileSync(markerFile, 'utf8')) as T;
  const clean = fileSize(join(dataDir, 'events.sqlite3')) === marker.eventsBytes && fileSize(join(dataDir, 'events.sqlite3-wal')) <= 0;
  return clean ? marker : undefined;
}

/**
 * Names the code that keeps the read models (projections, stores, the runtime's start): a caught-up copy made by
 * other code would not be what that code leaves after following the log.
 */
function readModelsKey(): string {
  const src = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');
  const h = createHash('sha256');
  for (const dir of ['projections', 'store', join('runtime', 'core')]) {
    for (const f of (readdirSync(join(src, dir), { recursive: true }) as string[]).sort()) {
      const file = join(src, dir, f);
      if (statSync(file).isFile()) h.update(`${dir}/${f}\0`).update(readFileSync(file));
    }
  }
  return h.digest('hex').slice(0, 12);
}

function copyDir(from: string, to: string): void {
  const began = performance.now();
  if (spawnSync('cp', ['-a', '--reflink=auto', from, to], { stdio: 'inherit' }).status !== 0) throw new Error(`copying ${from} failed`);
  log(`copied ${from} in ${seconds(began)} s`);
}

function checkDisk(): void {
  const fs = statfsSync(tmpdir());
  const free = fs.bavail * fs.bsize;
  const needed = 3 * EXECUTIONS * BYTES_PER_EXECUTION;
  log(`disk: ${(free / 1e9).toFixed(1)} GB free in ${tmpdir()}, this scale needs about ${(needed / 1e9).toFixed(1)} GB (generated, caught up, and the measured copy)`);
  if (free < needed) throw new Error(`not enough disk in ${tmpdir()} for ${EXECUTIONS} executions`);
}

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB$/m);
  if (!line) throw new Error(`no VmRSS for ${pid}`);
  return Number(line[1]) / 1024;
}

const call = (server: Server, path: string, body?: unknown): Promise<Response> =>
  fetch(`${server.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function json<T>(server: Server, path: string, body?: unknown): Promise<T> {
  const response = await call(server, path, body);
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

interface ListFigures {
  paginated: boolean;
  records: number;
  p50: { start: number; middle: number; end: number };
}

/**
 * Walks the list once by 1000 (the pagination contract: `limit`, opaque `cursor`, `x-berth-next-cursor` while more may
 * follow) keeping the cursors at its middle and near its end, then times `limit=100` pages at the three offsets, in
 * rounds. A server without the contract refuses `limit`: then every request is the whole list, unparameterised.
 */
async function measureList(server: Server): Promise<ListFigures> {
  const probe = await call(server, '/v1/executions?limit=1000');
  const paginated = probe.status !== 400;
  let records = 0;
  const cursors: string[] = [];
  if (paginated) {
    let response = probe;
    for (;;) {
      if (!response.ok) throw new Error(`list: ${response.status} ${await response.text()}`);
      records += ((await response.json()) as unknown[]).length;
      const next = response.headers.get('x-berth-next-cursor');
      if (!next) break;
      cursors.push(next);
      response = await call(server, `/v1/executions?limit=1000&cursor=${encodeURIComponent(next)}`);
    }
  } else {
    await probe.arrayBuffer();
    records = (await json<unknown[]>(server, '/v1/executions')).length;
  }
  const page = (cursor: string | undefined) =>
    !paginated ? '/v1/executions' : cursor === undefined ? '/v1/executions?limit=100' : `/v1/executions?limit=100&cursor=${encodeURIComponent(cursor)}`;
  const paths = { start: page(undefined), middle: page(cursors[Math.floor(cursors.length / 2)]), end: page(cursors.at(-1)) };
  const samples = { start: [] as number[], middle: [] as number[], end: [] as number[] };
  const sampling = performance.now();
  for (let i = 0; i < LIST_RUNS && (i < 1 || performance.now() - sampling < LIST_BUDGET_MS); i++) {
    for (const at of ['start', 'middle', 'end'] as const) {
      const began = performance.now();
      const response = await call(server, paths[at]);
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`${paths[at]}: ${response.status}`);
      samples[at].push(performance.now() - began);
    }
  }
  log(`list: ${samples.start.length} rounds of start, middle and end pages`);
  return { paginated, records, p50: { start: median(samples.start), middle: median(samples.middle), end: median(samples.end) } };
}

/** Submit `true`, then long-poll until its output is saved (what a caller waits for); p50 after a few untimed runs. */
async function measureTrue(server: Server, environment: string): Promise<number> {
  const run = async () => {
    const began = performance.now();
    const { id } = await json<{ id: string }>(server, '/v1/executions', { operationId: `bench-${randomUUID()}`, environment, command: ['true'] });
    for (;;) {
      const record = await json<{ status: string; step: string; exitCode?: number }>(server, `/v1/executions/${id}?waitMs=20000`);
      if (['saved', 'released', 'closing'].includes(record.step)) {
        if (record.status !== 'exited' || record.exitCode !== 0) throw new Error(`true failed: ${JSON.stringify(record)}`);
        return performance.now() - began;
      }
    }
  };
  for (let i = 0; i < 3; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < TRUE_RUNS; i++) samples.push(await run());
  return median(samples);
}

/** The generated store, from the cache when intact. */
async function generated(): Promise<Generated> {
  const cached = intact<Generated>(generatedData);
  if (cached) {
    log(`reusing ${generatedData} (generated in ${cached.generationS.toFixed(1)} s)`);
    return cached;
  }
  rmSync(cacheDir, { recursive: true, force: true });
  checkDisk();
  mkdirSync(generatedData, { recursive: true });
  const began = performance.now();
  const history = await generateHistory(generatedData, EXECUTIONS, log);
  const marker: Generated = { history, eventsBytes: fileSize(join(generatedData, 'events.sqlite3')), generationS: (performance.now() - began) / 1000 };
  writeFileSync(`${generatedData}.json`, JSON.stringify(marker, null, 2));
  log(`generated ${history.executions} executions (${history.events} events, ${(marker.eventsBytes / 1e9).toFixed(2)} GB) in ${marker.generationS.toFixed(1)} s`);
  return marker;
}

/**
 * A copy of the generated store whose read models followed the log, as a deployment's did: a real server started on
 * it once (its start catches the projections up), then stopped cleanly. Cached per version of the read models' code.
 */
async function caughtUp(): Promise<{ dataDir: string; marker: CaughtUp }> {
  const dataDir = join(cacheDir, `caught-up-${readModelsKey()}`);
  const cached = intact<CaughtUp>(dataDir);
  if (cached) {
    log(`reusing ${dataDir} (caught up in ${cached.catchUpS.toFixed(1)} s)`);
    return { dataDir, marker: cached };
  }
  for (const old of readdirSync(cacheDir).filter((f) => f.startsWith('caught-up-'))) rmSync(join(cacheDir, old), { recursive: true, force: true });
  copyDir(generatedData, dataDir);
  const server = await startBerthServe(dataDir, TOKEN);
  const rss = rssMb(server.child.pid!);
  await server.stop();
  const marker: CaughtUp = { eventsBytes: fileSize(join(dataDir, 'events.sqlite3')), catchUpS: server.startMs / 1000, rssMb: rss };
  writeFileSync(`${dataDir}.json`, JSON.stringify(marker, null, 2));
  log(`first start on the generated store (projections catch up): ${marker.catchUpS.toFixed(1)} s, RSS ${rss.toFixed(0)} MB`);
  return { dataDir, marker };
}

interface Side {
  starts: number[];
  rss: number[];
  list?: ListFigures;
  trueMs?: number;
}

/** One start of a side: start time and RSS always; on the last start the list and `true`, then a clean stop. */
async function measureStart(dataDir: string, side: Side, last: boolean, environment: (s: Server) => Promise<string>): Promise<void> {
  const server = await startBerthServe(dataDir, TOKEN);
  try {
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    side.starts.push(server.startMs);
    side.rss.push(rssMb(server.child.pid!));
    if (last) {
      side.list = await measureList(server);
      side.trueMs = await measureTrue(server, await environment(server));
    }
  } finally {
    await server.stop();
  }
}

const empty: Side = { starts: [], rss: [] };
const history: Side = { starts: [], rss: [] };
const emptyDir = mkdtempSync(join(tmpdir(), 'berth-bench-history-empty-'));
const runDir = mkdtempSync(join(tmpdir(), 'berth-bench-history-run-'));
try {
  const { history: generatedHistory, generationS } = await generated();
  const { dataDir: caughtUpData, marker: caught } = await caughtUp();
  const historyData = join(runDir, 'data');
  copyDir(caughtUpData, historyData);
  log(`load average ${loadavg()[0].toFixed(1)}`);
  const defaultEnvironment = generatedHistory.defaultEnvironment;
  let emptyEnvironment: string | undefined;
  for (let i = 0; i < STARTS; i++) {
    const last = i === STARTS - 1;
    await measureStart(emptyDir, empty, last, async (s) => {
      emptyEnvironment ??= (await json<{ id: string }>(s, '/v1/environments', { name: 'bench', profile: { provider: 'native' } })).id;
      return emptyEnvironment;
    });
    await measureStart(historyData, history, last, async () => defaultEnvironment);
  }
  const list = (s: Side) => s.list!;
  log(
    `${EXECUTIONS} executions (${generatedHistory.events} events; ${list(history).records} in the listed scope 'default'); ` +
      `list ${list(history).paginated ? 'paginated' : 'NOT paginated (the server refuses limit: every request returns the whole list)'}; ` +
      `starts ms empty [${empty.starts.map((x) => x.toFixed(0))}] history [${history.starts.map((x) => x.toFixed(0))}]; ` +
      `RSS MB empty [${empty.rss.map((x) => x.toFixed(0))}] history [${history.rss.map((x) => x.toFixed(0))}]; load average ${loadavg()[0].toFixed(1)}`,
  );
  log(`informational: generation ${generationS.toFixed(1)} s; projections' catch-up (first start) ${caught.catchUpS.toFixed(1)} s, RSS then ${caught.rssMb.toFixed(0)} MB`);
  figure(`${bench}-rss-after-start`, median(history.rss), 'MB', median(empty.rss), { op: '<=', ratio: 1.5 });
  // The bound is 1.5x empty + 2 s: as a ratio to the empty-store figure of this run.
  const emptyStart = median(empty.starts);
  figure(`${bench}-start-to-healthz`, median(history.starts), 'ms', emptyStart, { op: '<=', ratio: Number(((1.5 * emptyStart + 2000) / emptyStart).toFixed(3)) });
  for (const at of ['start', 'middle', 'end'] as const) {
    // Against the empty store's list (one empty page: it has no middle or end).
    figure(`${bench}-list-limit-100-p50-${at}`, list(history).p50[at], 'ms', list(empty).p50.start, { op: '<=', ratio: 2 });
  }
  figure(`${bench}-true-e2e-p50`, history.trueMs!, 'ms', empty.trueMs!, { op: '<=', ratio: 1.2 });
} finally {
  rmSync(runDir, { recursive: true, force: true });
  rmSync(emptyDir, { recursive: true, force: true });
}
