/**
 * `berth help` and `berth --version` load no command module they do not run (issue 18): the real `berth` child, its
 * every loaded module recorded by a load hook (fixtures/module-trace.mjs). Help reads the usage texts from usage.ts
 * alone; the version is answered by bin/berth.js before any module of the CLI is loaded; a command loads its own.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanEnv, root } from '../integration/cli-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The CLI's own modules (src/cli/*, from the sources or the build) a `berth ARGS` child loaded, by file name. */
async function cliModulesLoaded(args: string[]): Promise<{ code: number | null; stdout: string; modules: string[] }> {
  const trace = join(dir, `${args.join('_').replace(/\W/g, '') || 'none'}.txt`);
  const child = spawn(process.execPath, ['--import', join(root, 'test/e2e/fixtures/module-trace.mjs'), join(root, 'bin/berth.js'), ...args], {
    cwd: root,
    env: cleanEnv({ BERTH_TRACE_MODULES: trace }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  const loaded = (() => {
    try {
      return readFileSync(trace, 'utf8').trim().split('\n');
    } catch {
      return [];
    }
  })();
  const modules = [...new Set(loaded.map((url) => /\/src\/cli\/([\w-]+)\.[jt]s$/.exec(url)?.[1]).filter((m): m is string => m !== undefined))].sort();
  return { code, stdout, modules };
}

describe('lazy command loading', () => {
  it('berth help loads the dispatcher and the usage texts, and no command module', async () => {
    const { code, stdout, modules } = await cliModulesLoaded(['help']);
    expect(code).toBe(0);
    expect(stdout).toContain('usage: berth exec');
    // inherited-descriptors: main closes what the parent leaked before any command, help included.
    expect(modules).toEqual(['command-args', 'help', 'inherited-descriptors', 'main', 'stdout-lines', 'usage']);
  });

  it('berth --version loads no module of the CLI', async () => {
    const { code, stdout, modules } = await cliModulesLoaded(['--version']);
    expect(code).toBe(0);
    expect(stdout.trim()).toBe(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version);
    expect(modules).toEqual([]);
  });

  it('a command loads its own module, and not the others', async () => {
    const { code, modules } = await cliModulesLoaded(['ps', '--help']);
    expect(code).toBe(0);
    expect(modules).toContain('ps');
    for (const other of ['serve', 'env', 'exec', 'replay', 'workspace', 'lease', 'turn', 'cp', 'host']) expect(modules).not.toContain(other);
  });
});
