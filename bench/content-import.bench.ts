/**
 * Archive import speed: a 50 MiB, 5,000-file tar imported into an environment's source (stream, member policy,
 * staging, landing) against `tar -xf` of the same archive into an empty directory, in the same run. Median of ROUNDS,
 * alternating the two so both see the same page cache and machine load. Target: at most 2× tar.
 */
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EnvironmentContent } from '../src/content/environment-content.ts';
import { FILES, TOTAL_BYTES, writeProjectTree } from './content-fixture.ts';
import { figure, median } from './figure.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TARGET = 2;

const work = mkdtempSync(path.join(tmpdir(), 'berth-bench-import-'));
try {
  const tree = path.join(work, 'tree');
  writeProjectTree(path.join(tree, 'project'));
  const archive = path.join(work, 'project.tar');
  execFileSync('tar', ['-C', tree, '-cf', archive, 'project']);

  const times = { tar: [] as number[], berth: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const dest = path.join(work, `tar-${round}`);
    mkdirSync(dest);
    let t0 = performance.now();
    execFileSync('tar', ['-xf', archive, '-C', dest]);
    times.tar.push(performance.now() - t0);

    const content = new EnvironmentContent(path.join(work, `env-${round}`));
    t0 = performance.now();
    const result = await content.importArchive(createReadStream(archive, { highWaterMark: 1024 * 1024 }));
    times.berth.push(performance.now() - t0);
    if (result.files !== FILES || result.bytes !== TOTAL_BYTES) throw new Error(`import landed ${result.files} files, ${result.bytes} bytes`);
    rmSync(dest, { recursive: true, force: true });
    rmSync(content.layout.root, { recursive: true, force: true });
  }
  const [tar, berth] = [median(times.tar), median(times.berth)];
  process.stderr.write(`import of ${FILES} files, ${TOTAL_BYTES} bytes: berth ${berth.toFixed(0)} ms, tar -x ${tar.toFixed(0)} ms\n`);
  figure('content-import-tar-50MiB-5000-files', berth, 'ms', tar, { op: '<=', ratio: TARGET });
} finally {
  rmSync(work, { recursive: true, force: true });
}
