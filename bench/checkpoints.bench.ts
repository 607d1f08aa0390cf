/**
 * Checkpoints of a 10,000-file / 100 MiB tree (100 directories, sizes from bytes to ~150 KiB), each end to end
 * (capture, pack and manifest durable): a full one against `tar -c` to a file fsynced on the same filesystem; an
 * incremental one after changing one file against the full one (the view's watch names the changed file: tree-watch.ts),
 * beside the floor of a capture that has to look at every entry (lstat of each, in this process); materializing the tree into a staging volume (a Docker tmpfs
 * volume held by a container when the engine answers, else a tmpfs mounted here) against `tar -x` into another.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TreeManifest } from '../src/providers/file-host.ts';
import { DirectoryFileHost } from '../src/providers/directory-file-host.ts';
import { TreeCapture } from '../src/providers/tree-capture.ts';
import { CheckpointPacks } from '../src/runtime/workspaces/checkpoint-packs.ts';
import { figure, median } from './figure.ts';

const FILES = 10_000;
const DIRS = 100;
const TOTAL_BYTES = 100 * 1024 * 1024;
const RUNS = 5;
const LIMITS = { maxEntries: 1_000_000, maxBytes: 1 << 30 };
const OWNER = { uid: 1000, gid: 1000 };

const work = mkdtempSync(join(tmpdir(), 'berth-bench-checkpoints-'));
const tree = join(work, 'tree');

/** Deterministic varied sizes (half small, most under 20 KiB, a tail to 150 KiB) scaled to TOTAL_BYTES, random bytes. */
function makeTree(): void {
  let seed = 1;
  const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const raw = Array.from({ length: FILES }, () => {
    const r = next();
    return r < 0.5 ? next() * 4096 : r < 0.9 ? next() * 20_000 : next() * 150_000;
  });
  const scale = TOTAL_BYTES / raw.reduce((a, b) => a + b, 0);
  const pool = randomBytes(1 << 20);
  for (let d = 0; d < DIRS; d++) mkdirSync(join(tree, `dir-${d}`), { recursive: true });
  raw.forEach((size, i) => {
    const bytes = Math.floor(size * scale);
    const from = Math.floor(next() * (pool.length - bytes));
    // A distinct prefix per file: no two files share their bytes (dedup would flatter the capture).
    writeFileSync(join(tree, `dir-${i % DIRS}`, `file-${i}.dat`), Buffer.concat([Buffer.from(`${i}\n`), pool.subarray(from, from + bytes)]));
  });
}

function fsyncFile(path: string): void {
  const fd = openSync(path, 'r');
  fsyncSync(fd);
  closeSync(fd);
}

const time = async (fn: () => Promise<unknown> | unknown): Promise<number> => {
  const start = performance.now();
  await fn();
  return performance.now() - start;
};

const packs = new CheckpointPacks(join(work, 'checkpoints'));
const host = new DirectoryFileHost(tree);

/** A checkpoint end to end as the mount service takes it: capture, the pack made durable, the manifest stored. */
async function checkpoint(previous: TreeManifest | undefined): Promise<TreeManifest> {
  const writer = await packs.writer();
  const manifest = await host.capture(previous, writer, LIMITS);
  await writer.finish();
  await packs.saveManifest(manifest, previous);
  return manifest;
}

/** The floor of any sound incremental capture in this process: every directory listed, every entry lstat'ed. */
function lstatEveryEntry(dir: string): number {
  let entries = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    lstatSync(path, { bigint: true });
    entries++;
    if (entry.isDirectory()) entries += lstatEveryEntry(path);
  }
  return entries;
}

/** The incremental captures (which looked only at what the view's watch named) end on the tree a full walk finds. */
async function assertWalkFinds(tracked: TreeManifest): Promise<void> {
  const writer = await packs.writer();
  const rootFd = openSync(tree, 'r');
  try {
    const walked = await new TreeCapture(undefined, writer, LIMITS).run(rootFd);
    const shape = (m: TreeManifest) => JSON.stringify(m.entries.map(({ path, type, mode, size, hash, target }) => [path, type, mode, size, hash, target]));
    if (shape(walked) !== shape(tracked)) throw new Error('the incremental checkpoints do not end on the tree a full walk finds');
  } finally {
    closeSync(rootFd);
    await writer.abort();
  }
}

function emptyDir(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}

/** Two staging volumes: Docker tmpfs volumes held by a container when the engine answers, else tmpfs mounted here. */
function stagingVolumes(): { dirs: [string, string]; kind: string; cleanup: () => void } {
  const docker = (...args: string[]): string => execFileSync('docker', args, { encoding: 'utf8' }).trim();
  if (process.env.DOCKER_HOST && spawnSync('docker', ['version'], { stdio: 'ignore' }).status === 0) {
    const names = [`berth-bench-ckpt-a-${process.pid}`, `berth-bench-ckpt-b-${process.pid}`];
    for (const name of names) docker('volume', 'create', '--driver', 'local', '--opt', 'type=tmpfs', '--opt', 'device=tmpfs', '--opt', 'o=size=512m,uid=1000,gid=1000,nodev,nosuid', name);
    const container = docker('run', '-d', '--rm', ...names.flatMap((n, i) => ['-v', `${n}:/v${i}`]), 'berth-base:latest', 'sleep', '3600');
    const dirs = names.map((n) => docker('volume', 'inspect', '-f', '{{.Mountpoint}}', n)) as [string, string];
    return {
      dirs,
      kind: 'docker tmpfs volume',
      cleanup: () => {
        docker('rm', '-f', container);
        for (const name of names) docker('volume', 'rm', name);
      },
    };
  }
  const dirs = [join(work, 'vol-a'), join(work, 'vol-b')] as [string, string];
  for (const dir of dirs) {
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512m,uid=1000,gid=1000,nodev,nosuid', 'tmpfs', dir]);
  }
  return { dirs, kind: 'tmpfs mounted by the bench', cleanup: () => dirs.forEach((dir) => execFileSync('umount', [dir])) };
}

try {
  makeTree();
  // Files written in the last 2 s get no stat hint (a change within the timestamp granularity could go unseen):
  // the incremental figure is for a tree that settled before it was captured, as between an agent's turns.
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const tarFile = join(work, 'tree.tar');

  const fulls: number[] = [];
  const tars: number[] = [];
  let full: TreeManifest | undefined;
  for (let i = 0; i < RUNS; i++) {
    tars.push(await time(() => {
      execFileSync('tar', ['-cf', tarFile, '-C', tree, '.']);
      fsyncFile(tarFile);
    }));
    fulls.push(await time(async () => (full = await checkpoint(undefined))));
  }
  figure('checkpoint-full-10k-100mib-vs-tar-c', median(fulls), 'ms', median(tars), { op: '<=', ratio: 1.5 });

  // One file changed before each, each on the one before (as turns follow each other), against the full checkpoint.
  const incrementals: number[] = [];
  const floors: number[] = [];
  let previous = full!;
  for (let i = 0; i < RUNS; i++) {
    writeFileSync(join(tree, `dir-${i}`, `file-${i}.dat`), `changed ${i}\n`);
    incrementals.push(await time(async () => (previous = await checkpoint(previous))));
    floors.push(await time(() => lstatEveryEntry(tree)));
  }
  figure('checkpoint-incremental-1-of-10k-vs-full', median(incrementals), 'ms', median(fulls), { op: '<=', ratio: 0.05 });
  await assertWalkFinds(previous);
  const floor = median(floors);
  process.stderr.write(
    `floor: readdir + lstat of all ${lstatEveryEntry(tree)} entries, synchronous, in this process: median ${floor.toFixed(1)} ms = ${(floor / median(fulls)).toFixed(3)} of the full checkpoint; ` +
      `the incremental one is ${(median(incrementals) / floor).toFixed(2)}× that floor\n`,
  );

  const volumes = stagingVolumes();
  try {
    const [ours, theirs] = volumes.dirs;
    const target = full!;
    const applies: number[] = [];
    const untars: number[] = [];
    const view = new DirectoryFileHost(ours, OWNER);
    for (let i = 0; i < RUNS; i++) {
      emptyDir(ours);
      emptyDir(theirs);
      untars.push(await time(() => execFileSync('tar', ['-xf', tarFile, '-C', theirs])));
      applies.push(await time(() => view.apply(target, undefined, packs.source())));
    }
    figure(`checkpoint-materialize-100mib-vs-tar-x (${volumes.kind})`, median(applies), 'ms', median(untars), { op: '<=', ratio: 1.5 });
    process.stderr.write(`runs (ms): full ${fulls.map(Math.round)} floor ${floors.map(Math.round)} tar-c ${tars.map(Math.round)} incremental ${incrementals.map(Math.round)} apply ${applies.map(Math.round)} tar-x ${untars.map(Math.round)}\n`);
  } finally {
    volumes.cleanup();
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
