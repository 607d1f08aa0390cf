/**
 * The directory file host and the pack store on real temporary directories: a captured tree applied into an empty
 * directory is the same tree; an incremental capture hands the pack only what changed; identical files are stored
 * once; an apply makes only the changes between two trees, again harmlessly; diffTrees; the pack store's manifests.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fineCtime, learnCtimeGrain } from '../../src/providers/ctime-grain.ts';
import type { BlobSource, TreeManifest } from '../../src/providers/file-host.ts';
import { DirectoryFileHost } from '../../src/providers/directory-file-host.ts';
import { diffTrees } from '../../src/providers/tree-diff.ts';
import { CheckpointPacks } from '../../src/runtime/workspaces/checkpoint-packs.ts';
import { captureInto, describeTree, settle, tempDir, viewMaker } from '../fixtures/file-host-fixture.ts';

const OWNER = { uid: 1000, gid: 1000 };

let base: string;
let packs: CheckpointPacks;
const freshDir = viewMaker(() => base);

/** A tree with nested directories, several modes, an empty file, links, and Berth's private directory at the root. */
function plantTree(dir: string): void {
  mkdirSync(join(dir, 'src/lib/deep'), { recursive: true });
  mkdirSync(join(dir, 'empty-dir'));
  mkdirSync(join(dir, '.berth'));
  writeFileSync(join(dir, '.berth/secret'), 'private');
  writeFileSync(join(dir, 'README'), 'hello\n');
  writeFileSync(join(dir, 'empty'), '');
  writeFileSync(join(dir, 'src/main.ts'), 'console.log(1)\n'.repeat(1000));
  writeFileSync(join(dir, 'src/lib/deep/data.bin'), Buffer.alloc(3 << 20, 7));
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho hi\n');
  chmodSync(join(dir, 'run.sh'), 0o755);
  writeFileSync(join(dir, 'src/lib/private.key'), 'k');
  chmodSync(join(dir, 'src/lib/private.key'), 0o600);
  chmodSync(join(dir, 'src/lib/deep'), 0o700);
  symlinkSync('../README', join(dir, 'src/readme-link'));
  symlinkSync('/nowhere/at/all', join(dir, 'dangling'));
}

beforeAll(() => {
  base = tempDir('file-host');
  packs = new CheckpointPacks(join(base, 'checkpoints'));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('DirectoryFileHost', () => {
  it('captures a tree that applies into an empty directory as the same tree: modes, links, empty files and directories', async () => {
    const from = freshDir();
    plantTree(from);
    const { manifest } = await captureInto(packs, from);
    expect(manifest.entries.map((e) => e.path)).toEqual([...manifest.entries.map((e) => e.path)].sort());
    expect(manifest.entries.some((e) => e.path.startsWith('.berth'))).toBe(false);
    expect(manifest.files).toBe(6);
    expect(manifest.entries.find((e) => e.path === 'src/readme-link')).toMatchObject({ type: 'symlink', target: '../README' });
    expect(JSON.stringify(manifest)).not.toContain(base); // nothing of the host path

    const to = freshDir();
    await new DirectoryFileHost(to, OWNER).apply(manifest, undefined, packs.source());
    expect(describeTree(to)).toEqual(describeTree(from));
    expect(describeTree(to)['src/lib/deep']).toBe('directory 700');
    expect(statSync(join(to, 'src/lib/deep/data.bin')).uid).toBe(OWNER.uid);
    expect(lstatSync(join(to, 'src/readme-link')).uid).toBe(OWNER.uid);
    expect(statSync(join(to, 'src')).gid).toBe(OWNER.gid);
  });

  it('hands the pack only the bytes of the file that changed since the previous capture', async () => {
    const dir = freshDir();
    plantTree(dir);
    await settle();
    const first = await captureInto(packs, dir);
    expect(first.received.length).toBe(first.manifest.bytes);
    writeFileSync(join(dir, 'src/main.ts'), 'changed\n');

    const second = await captureInto(packs, dir, first.manifest);
    expect(second.received.toString()).toBe('changed\n');
    const blobOf = (m: TreeManifest, path: string) => m.entries.find((e) => e.path === path)?.blob;
    expect(blobOf(second.manifest, 'src/lib/deep/data.bin')).toEqual(blobOf(first.manifest, 'src/lib/deep/data.bin'));
    expect(blobOf(second.manifest, 'src/main.ts')).not.toEqual(blobOf(first.manifest, 'src/main.ts'));

    const to = freshDir();
    await new DirectoryFileHost(to).apply(second.manifest, undefined, packs.source());
    expect(describeTree(to)).toEqual(describeTree(dir));
  });

  it('gives no stat hint to a file changed just now, so a change within the timestamp granularity is not missed', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'hot'), 'a');
    const { manifest } = await captureInto(packs, dir);
    expect(manifest.entries[0]).toMatchObject({ path: 'hot', type: 'file' });
    expect(manifest.entries[0]!.stat).toBeUndefined();
    writeFileSync(join(dir, 'hot'), 'b'); // same size, probably the same timestamp
    const next = await captureInto(packs, dir, manifest);
    expect(next.received.toString()).toBe('b');
  });

  it('where ctimes are fine, hints a file changed just now, and still sees a same-size change made right after', async () => {
    const dir = freshDir();
    learnCtimeGrain(dir);
    const fine = fineCtime(statSync(dir, { bigint: true }).dev);
    writeFileSync(join(dir, 'hot'), 'a');
    const { manifest } = await captureInto(packs, dir);
    expect(manifest.entries[0]!.stat !== undefined).toBe(fine);
    const { atime, mtime } = statSync(join(dir, 'hot'));
    writeFileSync(join(dir, 'hot'), 'b'); // same size, and the mtime put back
    utimesSync(join(dir, 'hot'), atime, mtime);
    const next = await captureInto(packs, dir, manifest);
    expect(next.received.toString()).toBe('b');
    expect(next.manifest.entries[0]!.hash).not.toBe(manifest.entries[0]!.hash);
    // Unchanged since: the hint holds and nothing is read again.
    const again = await captureInto(packs, dir, next.manifest);
    expect(again.received.length).toBe(fine ? 0 : 1);
  });

  it('sees every change a command makes right after a capture of a settled tree: same size and mtime, mode, link, removal, empty dir, swapped dirs', async () => {
    const dir = freshDir();
    mkdirSync(join(dir, 'a'));
    mkdirSync(join(dir, 'b'));
    writeFileSync(join(dir, 'a/f'), 'from a');
    writeFileSync(join(dir, 'b/f'), 'from b');
    for (const name of ['same-size', 'mode-only', 'gone']) writeFileSync(join(dir, name), 'A');
    symlinkSync('old-target', join(dir, 'link'));
    await settle();
    const first = await captureInto(packs, dir);
    const hinted = first.manifest.entries.filter((e) => e.stat !== undefined).map((e) => e.path);
    expect(hinted).toEqual(['a/f', 'b/f', 'gone', 'mode-only', 'same-size']); // the next capture trusts these hints
    // Within the same second, by another process: same size, and the mtime put back to the nanosecond.
    execFileSync('sh', ['-c', 'touch -r same-size .ref && printf B > same-size && touch -r .ref same-size && rm .ref && chmod 600 mode-only && ln -sfn new-target link && rm gone && mkdir new-empty && mv a t && mv b a && mv t b'], { cwd: dir });

    const second = await captureInto(packs, dir, first.manifest);
    expect(diffTrees(first.manifest, second.manifest).map((c) => c.path)).toEqual(['a/f', 'b/f', 'gone', 'link', 'mode-only', 'new-empty', 'same-size']);
    const to = freshDir();
    await new DirectoryFileHost(to).apply(second.manifest, undefined, packs.source());
    expect(describeTree(to)).toEqual(describeTree(dir));
  });

  it('stores identical bytes once, within a capture and against the previous one', async () => {
    const dir = freshDir();
    const same = Buffer.alloc(100_000, 'x');
    writeFileSync(join(dir, 'a'), same);
    writeFileSync(join(dir, 'b'), same);
    const first = await captureInto(packs, dir);
    expect(first.received.length).toBeGreaterThanOrEqual(same.length); // handed twice, the second taken back
    const [a, b] = first.manifest.entries;
    expect(a!.blob).toEqual(b!.blob);

    writeFileSync(join(dir, 'c'), same);
    const writer = await packs.writer();
    const second = await new DirectoryFileHost(dir).capture(first.manifest, writer, { maxEntries: 10, maxBytes: 1 << 20 });
    expect(writer.offset).toBe(0);
    await writer.finish();
    expect(second.entries.map((e) => e.blob)).toEqual([a!.blob, a!.blob, a!.blob]);
    expect(readdirSync(join(base, 'checkpoints/packs')).filter((name) => name.startsWith('.tmp'))).toEqual([]);
  });

  it('round-trips files larger than the pack\'s buffers, a duplicate of one taken back after it reached the disk', async () => {
    const from = freshDir();
    const big = Buffer.alloc(6 << 20);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
    writeFileSync(join(from, 'a-big'), big);
    for (let i = 0; i < 40; i++) writeFileSync(join(from, `b-${i}`), Buffer.alloc(300_000, i)); // 12 MiB through both buffers
    writeFileSync(join(from, 'c-big-again'), big);
    const writer = await packs.writer();
    const { entries } = await new DirectoryFileHost(from).capture(undefined, writer, { maxEntries: 100, maxBytes: 1 << 30 });
    expect(writer.offset).toBe(big.length + 40 * 300_000);
    await writer.finish();
    expect(entries.at(-1)!.blob).toEqual(entries[0]!.blob);
    const to = freshDir();
    await new DirectoryFileHost(to).apply({ version: 1, entries, files: 42, bytes: 0, skipped: 0 }, undefined, packs.source());
    expect(describeTree(to)).toEqual(describeTree(from));
  });

  it('applies only the changes from base to target, leaving what neither mentions and local edits of unchanged files', async () => {
    const source = freshDir();
    plantTree(source);
    const before = (await captureInto(packs, source)).manifest;
    writeFileSync(join(source, 'README'), 'new readme\n');
    rmSync(join(source, 'src/lib'), { recursive: true });
    writeFileSync(join(source, 'added.txt'), 'added');
    chmodSync(join(source, 'run.sh'), 0o700);
    rmSync(join(source, 'empty'));
    mkdirSync(join(source, 'empty'));
    const after = (await captureInto(packs, source, before)).manifest;

    const view = freshDir();
    const host = new DirectoryFileHost(view, OWNER);
    await host.apply(before, undefined, packs.source());
    writeFileSync(join(view, 'unrelated.txt'), 'mine');
    writeFileSync(join(view, 'src/main.ts'), 'edited in the view');
    await host.apply(after, before, packs.source());

    const expected = describeTree(source);
    const got = describeTree(view);
    expect(got['unrelated.txt']).toBeDefined();
    expect(readFileSync(join(view, 'src/main.ts'), 'utf8')).toBe('edited in the view');
    delete got['unrelated.txt'];
    delete got['src/main.ts'];
    delete expected['src/main.ts'];
    expect(got).toEqual(expected);
    expect(existsSync(join(view, 'src/lib'))).toBe(false);

    await host.apply(after, before, packs.source()); // again: harmless
    await host.apply(after, undefined, packs.source()); // everything again, into a view already there
    expect(describeTree(view)).toEqual({ ...describeTree(source), 'unrelated.txt': describeTree(view)['unrelated.txt']! });
    expect(readdirSync(view).filter((name) => name.startsWith('.berth-apply'))).toEqual([]);
  });
  it('applies from a source that only streams (no synchronous reads), and refuses a blob shorter than its entry', async () => {
    const from = freshDir();
    plantTree(from);
    const { manifest } = await captureInto(packs, from);
    const local = packs.source();
    const streaming: BlobSource = { read: (location, size) => local.read(location, size) };
    const to = freshDir();
    await new DirectoryFileHost(to).apply(manifest, undefined, streaming);
    expect(describeTree(to)).toEqual(describeTree(from));

    const short: BlobSource = {
      async *read(location, size) {
        for await (const chunk of local.read(location, size)) yield chunk.subarray(0, chunk.length - 1);
      },
    };
    const changed = (await captureInto(packs, (writeFileSync(join(from, 'README'), 'other bytes\n'), from), manifest)).manifest;
    await expect(new DirectoryFileHost(to).apply(changed, manifest, short)).rejects.toMatchObject({ code: 'internal', detail: { path: 'README' } });
    expect(readFileSync(join(to, 'README'), 'utf8')).toBe('hello\n');
    expect(readdirSync(to).filter((name) => name.startsWith('.berth-apply'))).toEqual([]);
  });
});

describe('diffTrees', () => {
  const file = (path: string, hash: string, mode = 0o644) => ({ path, type: 'file' as const, mode, size: 1, hash: `sha256:${hash.repeat(64)}`, blob: { pack: 'p', offset: 0 } });
  const tree = (...entries: TreeManifest['entries']): TreeManifest => ({ version: 1, entries, files: 0, bytes: 0, skipped: 0 });

  it('lists additions, removals, content, mode and type changes by path, and nothing for a moved blob or a new stat hint', () => {
    const a = tree(file('a', '1'), { path: 'd', type: 'directory', mode: 0o755, size: 0 }, file('d/x', '2'), file('keep', '3'), file('m', '4'), file('t', '5'));
    const b = tree(
      { ...file('a', '1'), blob: { pack: 'q', offset: 9 }, stat: '1:2:3:4:5' },
      file('b', '6'),
      file('keep', '3'),
      file('m', '4', 0o600),
      { path: 't', type: 'symlink', mode: 0o777, size: 0, target: 'keep' },
    );
    expect(diffTrees(a, b)).toEqual([
      { path: 'b', type: 'file', before: null, after: { type: 'file', mode: 0o644, size: 1, hash: `sha256:${'6'.repeat(64)}` } },
      { path: 'd', type: 'directory', before: { type: 'directory', mode: 0o755, size: 0 }, after: null },
      { path: 'd/x', type: 'file', before: { type: 'file', mode: 0o644, size: 1, hash: `sha256:${'2'.repeat(64)}` }, after: null },
      { path: 'm', type: 'file', before: expect.objectContaining({ mode: 0o644 }), after: expect.objectContaining({ mode: 0o600 }) },
      { path: 't', type: 'symlink', before: expect.objectContaining({ type: 'file' }), after: { type: 'symlink', mode: 0o777, size: 0, target: 'keep' } },
    ]);
    expect(diffTrees(b, b)).toEqual([]);
    expect(diffTrees(undefined, b).map((c) => c.path)).toEqual(['a', 'b', 'keep', 'm', 't']);
  });
});

describe('CheckpointPacks', () => {
  it('stores a manifest once under its content id and loads it back; an unknown or malformed id is not_found', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'f'), 'x');
    const { manifest } = await captureInto(packs, dir);
    const id = await packs.saveManifest(manifest);
    expect(id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await packs.saveManifest(manifest)).toBe(id);
    expect(await packs.loadManifest(id)).toEqual(manifest);
    await expect(packs.loadManifest(`sha256:${'0'.repeat(64)}`)).rejects.toMatchObject({ code: 'not_found' });
    await expect(packs.loadManifest('sha256:../../etc/passwd')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('stores an incremental manifest as its changes from the whole one it builds on, loaded back equal in a new store', async () => {
    const dir = freshDir();
    for (let d = 0; d < 4; d++) {
      mkdirSync(join(dir, `d${d}`));
      for (let i = 0; i < 20; i++) writeFileSync(join(dir, `d${d}/f${i}`), `${d}-${i}`);
    }
    await settle();
    const fileOf = (id: string) => join(base, 'checkpoints/manifests', `${id.slice('sha256:'.length)}.json`);
    const sizeOf = (id: string) => statSync(fileOf(id)).size;
    const first = (await captureInto(packs, dir)).manifest;
    const firstId = await packs.saveManifest(first);
    writeFileSync(join(dir, 'd1/f3'), 'changed');
    rmSync(join(dir, 'd2/f7'));
    mkdirSync(join(dir, 'd2/new'));
    const second = (await captureInto(packs, dir, first)).manifest;
    const secondId = await packs.saveManifest(second, first);
    writeFileSync(join(dir, 'd3/f0'), 'changed too');
    const third = (await captureInto(packs, dir, second)).manifest;
    const thirdId = await packs.saveManifest(third, second);
    expect(sizeOf(secondId) * 10).toBeLessThan(sizeOf(firstId));
    expect(JSON.parse(readFileSync(fileOf(thirdId), 'utf8'))).toMatchObject({
      base: firstId, // builds on the whole one, not on the delta before it
      set: [expect.objectContaining({ path: 'd1/f3' }), expect.objectContaining({ path: 'd2/new' }), expect.objectContaining({ path: 'd3/f0' })],
      removed: ['d2/f7'],
    });
    const fresh = new CheckpointPacks(join(base, 'checkpoints'));
    expect(await fresh.loadManifest(secondId)).toEqual(second);
    expect(await fresh.loadManifest(thirdId)).toEqual(third);
    const loaded = await fresh.loadManifest(thirdId);
    writeFileSync(join(dir, 'd3/f1'), 'changed after a restart');
    const fourthId = await fresh.saveManifest((await captureInto(packs, dir, loaded)).manifest, loaded);
    expect(JSON.parse(readFileSync(fileOf(fourthId), 'utf8'))).toMatchObject({ base: firstId });

    for (let i = 0; i < 12; i++) writeFileSync(join(dir, `d0/f${i}`), 'most changed');
    const many = (await captureInto(packs, dir, third)).manifest;
    const manyId = await packs.saveManifest(many, third);
    expect(sizeOf(manyId)).toBeGreaterThan(sizeOf(thirdId)); // past an eighth of the tree: whole again
    expect(JSON.parse(readFileSync(fileOf(manyId), 'utf8'))).toEqual(many);

    // A stored delta naming another delta as its base (never written so) is refused, not followed down a chain.
    const chained = Buffer.from(JSON.stringify({ version: 1, base: thirdId, set: [], removed: [], files: 0, bytes: 0, skipped: 0 }));
    const chainedHex = createHash('sha256').update(chained).digest('hex');
    writeFileSync(fileOf(`sha256:${chainedHex}`), chained);
    await expect(new CheckpointPacks(join(base, 'checkpoints')).loadManifest(`sha256:${chainedHex}`)).rejects.toMatchObject({ code: 'internal' });
    await expect(fresh.loadManifest(`sha256:${chainedHex}`)).rejects.toMatchObject({ code: 'internal' }); // its base parsed already
  });

  it('keeps no empty pack and no aborted one', async () => {
    const packsDir = join(base, 'checkpoints/packs');
    const before = readdirSync(packsDir).sort();
    const empty = await packs.writer();
    await empty.finish();
    const aborted = await packs.writer();
    await aborted.write(Buffer.from('abc'));
    await aborted.abort();
    expect(readdirSync(packsDir).sort()).toEqual(before);
  });

  it('refuses a blob location that is not a pack name of the store', async () => {
    const read = async () => {
      for await (const chunk of packs.source().read({ pack: '../manifests/x', offset: 0 }, 3)) void chunk;
    };
    await expect(read()).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
