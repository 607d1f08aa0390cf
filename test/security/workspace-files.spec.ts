/**
 * The workspace file tools against a hostile tenant who controls what is in the workspace: path spellings that
 * climb out, links (intermediate, final, to / and to host files, swapped in by a real process during the calls),
 * FIFOs, hard links to host files, the private directory and the staged inputs. Nothing outside the root is ever
 * read, written, created or removed, and nothing blocks.
 */
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { INPUTS_DIR, PRIVATE_DIR, WorkspaceFiles } from '../../src/runtime/workspaces/workspace-files.ts';
import { startSwapper } from '../fixtures/link-swapper.ts';

const SECRET = `CANARY-${Math.random().toString(36).slice(2)}`;

let base: string;
let root: string;
/** A host directory beside the workspace, holding the secret; links point into it. */
let outside: string;
let files: WorkspaceFiles;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'berth-wsfiles-attack-'));
  root = join(base, 'root');
  outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), SECRET);
  files = new WorkspaceFiles(root);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/** The error a call fails with; the test fails if the call succeeds or fails with a non-Berth error. */
async function failure(p: Promise<unknown>): Promise<{ code: string; detail: Record<string, unknown>; message: string }> {
  try {
    await p;
  } catch (e) {
    if (isBerthError(e)) return { code: e.code, detail: e.detail, message: e.message };
    throw e;
  }
  throw new Error('expected the call to fail');
}

const outsideUntouched = () => {
  expect(readdirSync(outside)).toEqual(['secret']);
  expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe(SECRET);
};

/** Every tool, called on one path. */
const everyTool = (path: string): Record<string, () => Promise<unknown>> => ({
  read: () => files.read(path),
  write: () => files.write(path, Buffer.from('pwned'), { parents: true }),
  edit: () => files.edit(path, SECRET, 'pwned'),
  list: () => files.list(path),
  stat: () => files.stat(path),
  mkdir: () => files.mkdir(path, { parents: true }),
  remove: () => files.remove(path, { recursive: true }),
  stage: () => files.stage(path, Buffer.from('pwned')),
});

describe('path spellings are refused before the disk is touched', () => {
  const attacks: Array<[string, string]> = [
    ['..', 'parent_segment'],
    ['a/../../outside/secret', 'parent_segment'],
    ['../outside/secret', 'parent_segment'],
    ['/etc/passwd', 'absolute_path'],
    [`${'/'}${'x'}`, 'absolute_path'],
    ['a\0b', 'nul_byte'],
    ['a\\..\\b', 'backslash'],
    ['a//b', 'empty_segment'],
  ];
  for (const [path, reason] of attacks) {
    for (const [tool, call] of Object.entries(everyTool(path))) {
      it(`${tool} ${JSON.stringify(path)}: invalid_request ${reason}`, async () => {
        expect(await failure(call())).toMatchObject({ code: 'invalid_request', detail: { path, reason } });
        outsideUntouched();
      });
    }
  }
});

describe('links are never followed', () => {
  const refusedEverywhere = async (path: string, reason: string, except: string[] = []) => {
    for (const [tool, call] of Object.entries(everyTool(path))) {
      if (except.includes(tool)) continue;
      const got = await failure(call());
      expect({ tool, code: got.code, reason: got.detail.reason }).toEqual({ tool, code: 'invalid_request', reason });
      expect(got.message).not.toContain(SECRET);
    }
    outsideUntouched();
  };

  it('a link to a host directory as an intermediate component', async () => {
    symlinkSync(outside, join(root, 'l'));
    await refusedEverywhere('l/secret', 'symlink', ['stage']);
    await refusedEverywhere('l/new/deeper', 'symlink', ['stage', 'edit']);
    expect(await failure(files.list('l'))).toMatchObject({ detail: { reason: 'symlink', at: 'l' } });
  });

  it('a link to / as an intermediate component', async () => {
    symlinkSync('/', join(root, 'r'));
    await refusedEverywhere('r/etc/passwd', 'symlink', ['stage']);
    expect(await failure(files.list('r'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'symlink' } });
  });

  it('a link to a host file as the final component: refused by every tool that would act on it, described by stat', async () => {
    symlinkSync(join(outside, 'secret'), join(root, 's'));
    await refusedEverywhere('s', 'symlink', ['stat', 'mkdir', 'list', 'stage']);
    expect(await failure(files.list('s'))).toMatchObject({ detail: { reason: 'symlink' } });
    const described = await files.stat('s');
    expect(described).toMatchObject({ type: 'symlink' });
    expect(described.version).toBeUndefined();
    expect((await files.list('')).entries).toMatchObject([{ name: 's', type: 'symlink' }]);
    expect(await failure(files.mkdir('s'))).toMatchObject({ detail: { reason: 'exists' } });
    expect(statSync(join(root, 's'), { throwIfNoEntry: false })).toBeDefined();
  });

  it('a link inside staged inputs is refused to stage through', async () => {
    mkdirSync(join(root, INPUTS_DIR));
    symlinkSync(outside, join(root, INPUTS_DIR, 'l'));
    expect(await failure(files.stage('l/new', Buffer.from('x')))).toMatchObject({ detail: { reason: 'symlink' } });
    symlinkSync(outside, join(root, 'inputs-link'));
    rmSync(join(root, INPUTS_DIR), { recursive: true });
    symlinkSync(outside, join(root, INPUTS_DIR));
    expect(await failure(files.stage('new', Buffer.from('x')))).toMatchObject({ detail: { reason: 'symlink', at: INPUTS_DIR } });
    outsideUntouched();
  });
});

describe('special files and hard links', () => {
  it('a FIFO is refused without blocking, by reads and writes alike', { timeout: 5000 }, async () => {
    execFileSync('mkfifo', [join(root, 'p')]);
    for (const tool of ['read', 'write', 'edit', 'remove'] as const) {
      expect(await failure(everyTool('p')[tool]())).toMatchObject({ code: 'invalid_request', detail: { reason: 'special_file' } });
    }
    expect(await files.stat('p')).toMatchObject({ type: 'other' });
    expect(await failure(files.read('p/x'))).toMatchObject({ detail: { reason: 'special_file', at: 'p' } });
    writeFileSync(join(root, 'plain'), 'x');
    expect(await failure(files.read('plain/x'))).toMatchObject({ detail: { reason: 'not_a_directory', at: 'plain' } });
  });

  it('a hard link to a host file is neither read, written, edited, removed nor hashed', async () => {
    linkSync(join(outside, 'secret'), join(root, 'h'));
    for (const tool of ['read', 'write', 'edit', 'remove'] as const) {
      const got = await failure(everyTool('h')[tool]());
      expect({ tool, code: got.code, reason: got.detail.reason }).toEqual({ tool, code: 'invalid_request', reason: 'hard_link' });
    }
    const described = await files.stat('h');
    expect(described.version).toBeUndefined();
    outsideUntouched();
    expect(statSync(join(outside, 'secret')).nlink).toBe(2);
  });
});

describe('the private directory and the staged inputs', () => {
  beforeEach(() => {
    mkdirSync(join(root, PRIVATE_DIR));
    writeFileSync(join(root, PRIVATE_DIR, 'state'), SECRET);
    mkdirSync(join(root, INPUTS_DIR));
    writeFileSync(join(root, INPUTS_DIR, 'in.txt'), 'input');
  });

  it(`${PRIVATE_DIR} is not_found to every tool and absent from the root's listing`, async () => {
    for (const path of [PRIVATE_DIR, `${PRIVATE_DIR}/state`, `./${PRIVATE_DIR}/state`, `${PRIVATE_DIR}/new/x`]) {
      for (const [tool, call] of Object.entries(everyTool(path))) {
        if (tool === 'stage') continue;
        const got = await failure(call());
        expect({ tool, path, code: got.code, detail: got.detail }).toEqual({ tool, path, code: 'not_found', detail: { path, reason: 'private_path' } });
      }
    }
    expect((await files.list('')).entries.map((e) => e.name)).toEqual([INPUTS_DIR]);
    expect(readdirSync(join(root, PRIVATE_DIR))).toEqual(['state']);
    expect(readFileSync(join(root, PRIVATE_DIR, 'state'), 'utf8')).toBe(SECRET);
  });

  it(`${INPUTS_DIR} is readable, listable and stat-able, but write, edit, mkdir and remove are read_only_path`, async () => {
    expect((await files.read(`${INPUTS_DIR}/in.txt`)).data.toString()).toBe('input');
    expect((await files.list(INPUTS_DIR)).entries.map((e) => e.name)).toEqual(['in.txt']);
    expect(await files.stat(`${INPUTS_DIR}/in.txt`)).toMatchObject({ type: 'file', size: 5 });
    for (const path of [INPUTS_DIR, `${INPUTS_DIR}/in.txt`, `${INPUTS_DIR}/new`]) {
      for (const tool of ['write', 'edit', 'mkdir', 'remove'] as const) {
        const got = await failure(everyTool(path)[tool]());
        expect({ tool, code: got.code, reason: got.detail.reason }).toEqual({ tool, code: 'invalid_request', reason: 'read_only_path' });
      }
    }
    expect(readdirSync(join(root, INPUTS_DIR))).toEqual(['in.txt']);
  });

  it('the root itself cannot be removed', async () => {
    for (const path of ['', '.', './']) {
      expect(await failure(files.remove(path, { recursive: true }))).toMatchObject({ code: 'invalid_request', detail: { reason: 'root' } });
    }
    expect(existsSync(join(root, INPUTS_DIR, 'in.txt'))).toBe(true);
  });
});

describe('a link swapped in during the calls by a real process', () => {
  let swapper: ChildProcess | undefined;
  afterEach(() => {
    if (swapper?.pid) process.kill(swapper.pid, 'SIGKILL');
    swapper = undefined;
  });

  const swapping = async (dir: string, loop: string): Promise<void> => {
    swapper = await startSwapper(dir, loop);
  };

  it('a directory component swapped for a link to a host directory: no read returns host bytes, no write lands outside', { timeout: 60_000 }, async () => {
    mkdirSync(join(root, 'real'));
    writeFileSync(join(root, 'real', 'secret'), 'inside');
    symlinkSync(outside, join(root, 'link'));
    // `d` alternates between the real directory and the link (renames are atomic: it is always one or the other, or absent).
    await swapping(
      root,
      `quietly(() => fs.renameSync(p('real'), p('d'))); quietly(() => fs.renameSync(p('d'), p('real')));
       quietly(() => fs.renameSync(p('link'), p('d'))); quietly(() => fs.renameSync(p('d'), p('link')));`,
    );
    const outcomes = new Map<string, number>();
    const note = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    for (let i = 0; i < 400; i++) {
      try {
        const got = await files.read('d/secret');
        expect(got.data.toString()).toMatch(/^(inside|write \d+)$/);
        note('read ok');
      } catch (e) {
        if (!isBerthError(e)) throw e;
        note(`read ${e.code} ${e.detail.reason ?? ''}`);
      }
      try {
        await files.write('d/secret', Buffer.from(`write ${i}`));
        note('write ok');
      } catch (e) {
        if (!isBerthError(e)) throw e;
        note(`write ${e.code} ${e.detail.reason ?? ''}`);
      }
    }
    process.kill(swapper!.pid!, 'SIGKILL');
    outsideUntouched();
    // Both ways were seen: the race really ran (links refused, and the real directory used).
    expect(outcomes.get('read ok')! + outcomes.get('write ok')!).toBeGreaterThan(0);
    expect((outcomes.get('read invalid_request symlink') ?? 0) + (outcomes.get('write invalid_request symlink') ?? 0)).toBeGreaterThan(0);
  });

  it('a directory swapped in for the file being replaced: refused is_directory, the directory kept whole', { timeout: 60_000 }, async () => {
    // A write over a file swaps the new one in and drops the old (workspace-files.ts putUnder): what it swapped out
    // must never be a directory that is then lost.
    const d = join(root, 'd');
    mkdirSync(join(d, 'dir'), { recursive: true });
    writeFileSync(join(d, 'dir', 'marker'), 'kept');
    writeFileSync(join(d, 'file'), 'inside');
    await swapping(
      d,
      `quietly(() => fs.renameSync(p('file'), p('f'))); quietly(() => fs.renameSync(p('f'), p('file')));
       quietly(() => fs.renameSync(p('dir'), p('f'))); quietly(() => fs.renameSync(p('f'), p('dir')));`,
    );
    const outcomes = new Set<string>();
    const deadline = Date.now() + 40_000;
    const raced = () => outcomes.has('invalid_request is_directory');
    for (let i = 0; i < 400 || (!raced() && Date.now() < deadline); i++) {
      try {
        await files.write('d/f', Buffer.from(`write ${i}`));
        outcomes.add('ok');
      } catch (e) {
        if (!isBerthError(e)) throw e;
        outcomes.add(`${e.code} ${e.detail.reason ?? ''}`);
      }
    }
    process.kill(swapper!.pid!, 'SIGKILL');
    expect(outcomes).toContain('invalid_request is_directory');
    // The directory is under a name the swapper gave it, its file in it; nothing was left under a temporary name.
    const names = readdirSync(d);
    const kept = names.filter((n) => existsSync(join(d, n, 'marker')));
    expect(kept).toHaveLength(1);
    expect(['dir', 'f', 'file']).toContain(kept[0]);
    expect(readFileSync(join(d, kept[0]!, 'marker'), 'utf8')).toBe('kept');
    expect(names.filter((n) => n.startsWith('.berth-tmp-'))).toEqual([]);
    outsideUntouched();
  });

  it('the file itself swapped for a link to a host file: never read through, never written through', { timeout: 60_000 }, async () => {
    mkdirSync(join(root, 'd'));
    // `f` alternates between a link to the host secret and a regular file (made O_EXCL, so never written through a link).
    await swapping(
      join(root, 'd'),
      `quietly(() => fs.unlinkSync(p('f'))); quietly(() => fs.symlinkSync(${JSON.stringify(join(outside, 'secret'))}, p('f')));
       quietly(() => fs.unlinkSync(p('f'))); quietly(() => fs.writeFileSync(p('f'), 'inside', { flag: 'wx' }));`,
    );
    const outcomes = new Set<string>();
    // At least 400 rounds, and on until both sides of the race were seen (a loaded machine may starve the swapper).
    const deadline = Date.now() + 40_000;
    const raced = () => outcomes.has('ok') && outcomes.has('invalid_request symlink');
    for (let i = 0; i < 400 || (!raced() && Date.now() < deadline); i++) {
      for (const call of [() => files.read('d/f'), () => files.write('d/f', Buffer.from(`write ${i}`)), () => files.edit('d/f', 'i', 'I')]) {
        try {
          const got = await call();
          if ('data' in got) expect(got.data.toString()).not.toContain(SECRET);
          outcomes.add('ok');
        } catch (e) {
          if (!isBerthError(e)) throw e;
          expect(e.message).not.toContain(SECRET);
          outcomes.add(`${e.code} ${e.detail.reason ?? ''}`);
        }
      }
    }
    process.kill(swapper!.pid!, 'SIGKILL');
    outsideUntouched();
    expect(outcomes).toContain('ok');
    expect(outcomes).toContain('invalid_request symlink');
  });
});
