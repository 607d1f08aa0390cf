/**
 * Version snapshot speed: copying a 50 MiB, 5,000-file source into a new version directory (copyFile with
 * COPYFILE_FICLONE, several at a time) against `cp -a` of the same tree, in the same run. Median of ROUNDS,
 * alternating which goes first. Target: at most 1.5× cp -a.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { snapshot } from '../src/content/versions.ts';
import { FILES, TOTAL_BYTES, writeProjectTree } from './content-fixture.ts';
import { figure, median } from './figure.ts';

/** Even: each side goes first in as many rounds as it goes second (see the loop). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const TARGET = 1.5;

const work = mkdtempSync(path.join(tmpdir(), 'berth-bench-snapshot-'));
try {
  const source = path.join(work, 'source');
  writeProjectTree(source);
  const times = { cp: [] as number[], berth: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const copied = path.join(work, `cp-${round}`);
    const cp = async () => {
      const t0 = performance.now();
      execFileSync('cp', ['-a', source, copied]);
      times.cp.push(performance.now() - t0);
    };
    const ours = async () => {
      const t0 = performance.now();
      const result = await snapshot(source, path.join(work, 'versions', String(round + 1)));
      times.berth.push(performance.now() - t0);
      if (result.files !== FILES) throw new Error(`snapshot copied ${result.files} files`);
    };
    // Each goes first every other round: the side that follows the last round's removals by a second or more pays
    // for them (ext4 without a journal skips the inodes freed in the last minute), the one right after them does not.
    for (const side of round % 2 === 0 ? [cp, ours] : [ours, cp]) await side();
    rmSync(copied, { recursive: true, force: true });
    rmSync(path.join(work, 'versions', String(round + 1)), { recursive: true, force: true });
  }
  const [cp, berth] = [median(times.cp), median(times.berth)];
  process.stderr.write(`snapshot of ${FILES} files, ${TOTAL_BYTES} bytes: berth ${berth.toFixed(0)} ms, cp -a ${cp.toFixed(0)} ms\n`);
  figure('version-snapshot-50MiB-5000-files', berth, 'ms', cp, { op: '<=', ratio: TARGET });
} finally {
  rmSync(work, { recursive: true, force: true });
}
