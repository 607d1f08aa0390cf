/**
 * How fast `berth help` and `berth --version` answer (issue 18: well under 300 ms once built), as the median of 11
 * child processes, next to `node -e 0` from the same run (the floor every command pays). Measures the built CLI of
 * BERTH_CLI_ROOT, else of this checkout built first (`npm run build`, about 20 s): without a build newer than every
 * source, bin/berth.js runs the sources through tsx, which is not what an installed package runs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { figure, median } from './figure.ts';

const root = process.env.BERTH_CLI_ROOT ?? join(dirname(fileURLToPath(import.meta.url)), '..');
if (process.env.BERTH_CLI_ROOT === undefined) execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const built = existsSync(join(root, 'dist/.built'));

const ms = (args: string[]): number => {
  const start = process.hrtime.bigint();
  execFileSync(process.execPath, args, { cwd: root, stdio: 'ignore' });
  return Number(process.hrtime.bigint() - start) / 1e6;
};
const medianOf = (args: string[]) => median(Array.from({ length: 11 }, () => ms(args)));

const floor = medianOf(['-e', '0']);
console.error(`root ${root}, built ${built}: node -e 0 ${floor.toFixed(1)} ms`);
// 300 ms against a floor of ~120 ms (node alone on a quiet machine): at most 2.5 times node's own start.
figure('cli-help-start', medianOf([join(root, 'bin/berth.js'), 'help']), 'ms', floor, { op: '<=', ratio: 2.5 });
figure('cli-version-start', medianOf([join(root, 'bin/berth.js'), '--version']), 'ms', floor, { op: '<=', ratio: 2.5 });
