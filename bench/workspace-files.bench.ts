/**
 * Turn file tools over HTTP (PUT and GET /v1/sessions/{id}/turns/{turnId}/files?path=, one open turn on a managed
 * workspace) against raw fs writeFile and readFile of the same bytes in this process on the same disk, alternating,
 * for 4 KiB and 4 MiB. Figures: the 4 MiB write and read (median ms per call), target within 3x of raw; the 4 KiB
 * medians, which the per-request cost dominates and the issue sets no target for, are reported on stderr.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { caller } from './bench-gateway.ts';
import { figure, median } from './figure.ts';
import { startWorkspaceBed } from './workspace-bed.ts';

const TARGET = 3;
const SIZES = [
  { name: '4KiB', bytes: 4 * 1024, runs: Number(process.env.BENCH_RUNS_SMALL ?? 300) },
  { name: '4MiB', bytes: 4 * 1024 * 1024, runs: Number(process.env.BENCH_RUNS_LARGE ?? 40) },
];
const WARMUP = 5;

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

  for (const size of SIZES) {
    const data = randomBytes(size.bytes);
    const path = `bench-${size.name}.bin`;
    const rawPath = join(bed.rawDir, path);
    const ms = { httpWrite: [] as number[], rawWrite: [] as number[], httpRead: [] as number[], rawRead: [] as number[] };
    for (let i = 0; i < WARMUP + size.runs; i++) {
      data[0] = i & 0xff; // each write changes the file, as an agent's would
      const round = {
        rawWrite: await timed(() => writeFile(rawPath, data)),
        httpWrite: await timed(async () => {
          const res = await fetch(`${files}?path=${path}`, { method: 'PUT', headers, body: data });
          if (res.status !== 200) throw new Error(`PUT ${res.status}: ${await res.text()}`);
          await res.arrayBuffer();
        }),
        rawRead: await timed(async () => {
          if ((await readFile(rawPath)).length !== size.bytes) throw new Error('raw read short');
        }),
        httpRead: await timed(async () => {
          const res = await fetch(`${files}?path=${path}`, { headers });
          const body = Buffer.from(await res.arrayBuffer());
          if (res.status !== 200 || body.length !== size.bytes || body[0] !== (i & 0xff)) throw new Error(`GET ${res.status}: ${body.length} bytes`);
        }),
      };
      if (i >= WARMUP) for (const k of Object.keys(round) as (keyof typeof round)[]) ms[k].push(round[k]);
    }
    const m = Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, median(v)])) as Record<keyof typeof ms, number>;
    console.error(
      `workspace-files ${size.name} over ${size.runs} runs: write HTTP ${m.httpWrite.toFixed(3)} ms vs raw ${m.rawWrite.toFixed(3)} ms (x${(m.httpWrite / m.rawWrite).toFixed(2)}), ` +
        `read HTTP ${m.httpRead.toFixed(3)} ms vs raw ${m.rawRead.toFixed(3)} ms (x${(m.httpRead / m.rawRead).toFixed(2)})`,
    );
    if (size.name === '4MiB') {
      figure('workspace-file-write-4MiB-http', m.httpWrite, 'ms', m.rawWrite, { op: '<=', ratio: TARGET });
      figure('workspace-file-read-4MiB-http', m.httpRead, 'ms', m.rawRead, { op: '<=', ratio: TARGET });
    }
  }
  await bed.berth.api.releaseTurn(caller, session!, turn.id);
} finally {
  await bed.close();
}
