import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentContent } from '../../src/content/environment-content.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let base: string;
let content: EnvironmentContent;

beforeEach(() => {
  base = mkdtempSync(path.join(tmpdir(), 'berth-content-crash-'));
  content = new EnvironmentContent(path.join(base, 'env'));
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/** Run `script` in a child (real module imports), wait for it to print `ready`, then SIGKILL it. */
async function killWhenReady(script: string): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) if (line === 'ready') break;
  child.kill('SIGKILL');
  await once(child, 'close');
}

describe('content after a crash', () => {
  it('should keep the old file whole when a writer is killed mid-body, and recovery clears its leftovers', async () => {
    await content.source.write('data.bin', [Buffer.from('old bytes')]);
    await killWhenReady(`
      import { EnvironmentContent } from './src/content/environment-content.ts';
      const content = new EnvironmentContent(${JSON.stringify(content.layout.root)});
      const body = (async function* () {
        yield Buffer.alloc(1024 * 1024, 1);
        console.log('ready');
        await new Promise(() => {}); // the rest of the body never comes
      })();
      await content.source.write('data.bin', body);
    `);
    expect(readFileSync(path.join(content.layout.source, 'data.bin'), 'utf8')).toBe('old bytes');
    expect(readdirSync(content.layout.staging).length).toBe(1); // the killed writer's temporary file
    await content.recover();
    expect(existsSync(content.layout.staging)).toBe(false);
    expect((await content.source.tree()).entries.map((e) => e.path)).toEqual(['data.bin']);
  });

  it('should leave the source as it was when an import is killed while unpacking', async () => {
    await content.source.write('keep.txt', [Buffer.from('keep')]);
    await killWhenReady(`
      import { readdirSync } from 'node:fs';
      import { join } from 'node:path';
      import { EnvironmentContent } from './src/content/environment-content.ts';
      import { craftTar } from './test/unit/content/crafted-tar.ts';
      import { waitFor } from './test/fixtures/wait-for.ts';
      const content = new EnvironmentContent(${JSON.stringify(content.layout.root)});
      const tar = craftTar(Array.from({ length: 200 }, (_, i) => ({ name: 'f' + i, content: Buffer.from('x') })));
      const staging = content.layout.staging;
      const unpacked = () => readdirSync(join(staging, readdirSync(staging).find((n) => n.startsWith('import-')), 'tree')).length;
      const body = (async function* () {
        yield tar.subarray(0, 50 * 1024); // about 50 of the 200 files
        await waitFor(unpacked, { until: (n) => n > 10, timeoutMs: 30_000, what: 'ten files unpacked' });
        console.log('ready');
        await new Promise(() => {});
      })();
      await content.importArchive(body, { replace: true });
    `);
    const staged = readdirSync(content.layout.staging).find((n) => n.startsWith('import-')) as string;
    expect(readdirSync(path.join(content.layout.staging, staged, 'tree')).length).toBeGreaterThan(10); // killed mid-unpack
    expect((await content.source.tree()).entries.map((e) => e.path)).toEqual(['keep.txt']);
    await content.recover();
    expect(existsSync(content.layout.staging)).toBe(false);
    expect((await content.source.tree()).entries.map((e) => e.path)).toEqual(['keep.txt']);
  });

  it('should put the old source back when a replacing import died between its two renames, and drop partial versions', async () => {
    await content.source.write('old.txt', [Buffer.from('old')]);
    // The state a crash leaves after `source` was moved aside and before the new tree was renamed in.
    mkdirSync(content.layout.staging, { recursive: true });
    renameSync(content.layout.source, path.join(content.layout.staging, `replaced-${Date.now()}-x`));
    mkdirSync(path.join(content.layout.staging, 'import-y/tree'), { recursive: true });
    writeFileSync(path.join(content.layout.staging, 'import-y/tree/new.txt'), 'new');
    mkdirSync(path.join(content.layout.versions, '.partial-2-z'), { recursive: true });
    mkdirSync(path.join(content.layout.versions, '1'), { recursive: true });

    await content.recover();
    expect(readFileSync(path.join(content.layout.source, 'old.txt'), 'utf8')).toBe('old');
    expect(existsSync(content.layout.staging)).toBe(false);
    expect(readdirSync(content.layout.versions)).toEqual(['1']);
  });
});
