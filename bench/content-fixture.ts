/**
 * The project tree the content benchmarks work on: FILES files, TOTAL bytes in all (sizes spread from a few bytes to
 * a few hundred KiB, like a real project), in nested directories, random bytes. Shared by content-import and
 * version-snapshot so both measure the same shape.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const FILES = Number(process.env.BENCH_CONTENT_FILES ?? 5000);
export const TOTAL_BYTES = Number(process.env.BENCH_CONTENT_MIB ?? 50) * 1024 * 1024;

/** Write the tree under `dir` (as `dir/<wrapper>/…` when a wrapper is given, the shape of a repository archive). */
export function writeProjectTree(dir: string): { files: number; bytes: number } {
  // Sizes follow a skewed spread (many small files, a few big ones), scaled to the exact total.
  let seed = 42;
  const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const weights = Array.from({ length: FILES }, () => next() ** 4);
  const scale = TOTAL_BYTES / weights.reduce((a, b) => a + b, 0);
  const sizes = weights.map((w) => Math.max(1, Math.floor(w * scale)));
  sizes[0] += TOTAL_BYTES - sizes.reduce((a, b) => a + b, 0);
  const pool = randomBytes(Math.max(...sizes));
  for (let i = 0; i < FILES; i++) {
    const sub = path.join(dir, `pkg-${i % 20}`, `mod-${i % 7}`, i % 3 === 0 ? 'deep' : '');
    mkdirSync(sub, { recursive: true });
    writeFileSync(path.join(sub, `file-${i}.dat`), pool.subarray(0, sizes[i]));
  }
  return { files: FILES, bytes: TOTAL_BYTES };
}
