/**
 * Archive import speed: a 50 MiB, 5,000-file tar imported into an environment's source (stream, member policy,
 * staging, landing) against `tar -xf` of the same archive into an empty directory on the same filesystem, in the same
 * run. Each run reads its own copy of the archive written just before it, and every run starts after a `sync`, so
 * both see the same page cache (input cached, nothing of an earlier run left to write back). One run of each is
 * discarded, then ROUNDS rounds alternate which goes first; medians. Target: at most 2× tar.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, createReadStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EnvironmentContent } from '../src/content/environment-content.ts';
import { FILES, TOTAL_BYTES, writeProjectTree } from './content-fixture.ts';
import { figure, median } from './figure.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const TARGET = 2;

const work = mkdtempSync(path.join(tmpdir(), 'berth-bench-import-'));
try {
  const tree = path.join(work, 'tree');
  writeProjectTree(path.join(tree, 'project'));
  const archive = path.join(work, 'project.tar');
  execFileSync('tar', ['-C', tree, '-cf', archive, 'project']);

  /** Times one side on a fresh copy of the archive, then removes what it wrote (untimed). */
  const timed = async (side: 'tar' | 'berth', round: number): Promise<number> => {
    const input = path.join(work, `${side}-${round}.tar`);
    copyFileSync(archive, input);
    const dest = path.join(work, `${side}-${round}`);
    if (side === 'tar') mkdirSync(dest);
    execFileSync('sync');
    const t0 = performance.now();
    if (side === 'tar') {
      execFileSync('tar', ['-xf', input, '-C', dest]);
    } else {
      const result = await new EnvironmentContent(dest).importArchive(createReadStream(input, { highWaterMark: 1024 * 1024 }));
      if (result.files !== FILES || result.bytes !== TOTAL_BYTES) throw new Error(`import landed ${result.files} files, ${result.bytes} bytes`);
    }
    const elapsed = performance.now() - t0;
    rmSync(dest, { recursive: true, force: true });
    rmSync(input);
    return elapsed;
  };

  await timed('tar', -1);
  await timed('berth', -1);
  const times = { tar: [] as number[], berth: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['tar', 'berth'] as const) : (['berth', 'tar'] as const);
    for (const side of order) times[side].push(await timed(side, round));
  }
  process.stderr.write(`content-import: tar -x ${times.tar.map((t) => t.toFixed(0)).join(' ')} ms; berth ${times.berth.map((t) => t.toFixed(0)).join(' ')} ms\n`);
  const [tar, berth] = [median(times.tar), median(times.berth)];
  process.stderr.write(`import of ${FILES} files, ${TOTAL_BYTES} bytes: berth ${berth.toFixed(0)} ms, tar -x ${tar.toFixed(0)} ms\n`);
  figure('content-import-tar-50MiB-5000-files', berth, 'ms', tar, { op: '<=', ratio: TARGET });
} finally {
  rmSync(work, { recursive: true, force: true });
}
