/**
 * `npm run bench`: runs every bench/*.bench.ts one after another (each in its own tsx process, so none warms or
 * pollutes another), passes their output through, then re-prints every JSON figure line it saw, so the run ends
 * with one JSON line per figure. Exits 1 if a benchmark crashed (an unmet target is a figure, not a crash).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const benchDir = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(benchDir)
  .filter((f) => f.endsWith('.bench.ts') && (only.length === 0 || only.some((o) => f.includes(o))))
  .sort();

const isFigure = (line: string): boolean => {
  try {
    const v = JSON.parse(line);
    return v !== null && typeof v === 'object' && typeof v.bench === 'string';
  } catch {
    return false;
  }
};

/**
 * The measuring processes keep the memory they free (glibc serves large buffers from its heap and never gives it
 * back), raw baselines and Berth's in-process parts alike. On the Firecracker VM this project is measured on, memory
 * given back is reported to the host (virtio-balloon page reporting) and each 4 KiB page of it costs a host fault the
 * next time it is touched: a 4 MiB answer read into fresh memory took 3 ms instead of 1.1 ms over a bare loopback
 * server, in runs of eight, as the heap was trimmed after each collection. A `berth serve` child runs as installed,
 * without it (bench/berth-serve.ts). A GLIBC_TUNABLES of the caller's own (empty: none) is kept.
 */
const KEEP_FREED_MEMORY = 'glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=1073741824';

const figures: string[] = [];
const crashed: string[] = [];
for (const file of files) {
  process.stderr.write(`\n== ${file}\n`);
  const child = spawn(process.execPath, ['--import', 'tsx', join(benchDir, file)], {
    cwd: join(benchDir, '..'),
    env: { ...process.env, GLIBC_TUNABLES: process.env.GLIBC_TUNABLES ?? KEEP_FREED_MEMORY },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    process.stdout.write(`${line}\n`);
    if (isFigure(line)) figures.push(line);
  });
  const [code, signal] = (await once(child, 'close')) as [number | null, string | null];
  if (code !== 0) {
    crashed.push(file);
    process.stderr.write(`== ${file} failed (${signal ?? `exit ${code}`})\n`);
  }
}

process.stderr.write(`\n== ${figures.length} figures from ${files.length} benchmarks${crashed.length ? `; failed: ${crashed.join(', ')}` : ''}\n`);
for (const line of figures) process.stdout.write(`${line}\n`);
process.exitCode = crashed.length > 0 ? 1 : 0;
