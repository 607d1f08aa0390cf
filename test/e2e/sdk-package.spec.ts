/**
 * The package as a user gets it (issue 18): `npm run build && npm pack`, a project outside the repository that
 * installs the tarball from its own package.json, and a script run by plain `node` (no tsx) that drives a sandbox on a
 * real server through `berth/client`. The install skips install scripts (`--ignore-scripts`): the native modules of
 * the server (better-sqlite3, node-pty) are then never built, which shows the client does not need them, and the
 * install needs no download beyond the npm registry. The same script bundled by esbuild runs without node_modules.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerAvailable } from '../integration/docker-env.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'berth-sdk-package-'));
const app = join(scratch, 'app');
let server: BerthServer;

/** The server-side packages: none of them may be part of the client. */
const serverOnly = ['better-sqlite3', 'node-pty', 'fastify', 'dockerode', 'pino', 'xstate', 'execa', '@eventstore', 'prom-client'];

beforeAll(async () => {
  await run('npm', ['run', 'build'], { cwd: repo });
  const { stdout } = await run('npm', ['pack', '--silent', '--pack-destination', scratch], { cwd: repo });
  const tarball = join(scratch, stdout.trim().split('\n').at(-1)!);
  await run('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'berth-sdk-user', private: true, type: 'module' }));
  await run('npm', ['install', tarball, '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app });
  copyFileSync(join(import.meta.dirname, 'fixtures', 'sdk-user-script.mjs'), join(app, 'script.mjs'));
  server = await startServer();
}, 1_200_000);
afterAll(async () => {
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const runScript = async (file: string, cwd: string, profile: Record<string, unknown> = {}) => {
  const env = { PATH: process.env.PATH, BERTH_URL: server.url, BERTH_TOKEN: tokens.alice, BERTH_PROFILE: JSON.stringify(profile) };
  const { stdout } = await run(process.execPath, [file], { cwd, env });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
};

const expectedRun = {
  stdout: 'hello\n',
  stderr: 'warning\n',
  exitCode: 0,
  threw: { isCommandExitError: true, exitCode: 7 },
  readBack: 'written by the script\n',
  catByCommand: 'written by the script\n',
  listedAfterKill: false,
};

describe('the packed package under plain node', () => {
  it('should create a sandbox, run, throw on a non-zero exit, write and read a file and kill, from the built JS', async () => {
    const seen = await runScript('script.mjs', app);
    expect(seen).toMatchObject(expectedRun);
    expect(seen.execArgv).toEqual([]);
    expect(seen.resolved).toBe(`file://${app}/node_modules/berth/dist/src/client/index.js`);
    // Installed without scripts: the server's native module was never built, and the client did not need it.
    expect(existsSync(join(app, 'node_modules/better-sqlite3/build'))).toBe(false);
  });

  it.skipIf(!dockerAvailable)('should drive a Docker profile with the same script', async () => {
    expect(await runScript('script.mjs', app, { provider: 'docker', image: 'berth-base:latest' })).toMatchObject(expectedRun);
  });

  it('should bundle the client without a server-side package, and the bundle runs alone', async () => {
    const bundleDir = join(scratch, 'bundle');
    const result = await build({
      entryPoints: [join(app, 'script.mjs')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: join(bundleDir, 'script.mjs'),
      // ws loads these optional accelerators only when they are installed.
      external: ['bufferutil', 'utf-8-validate'],
      // ws is CommonJS: its require() of node's modules needs a require in the ESM bundle (esbuild's usual banner).
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((input) => input.includes('node_modules/berth/dist/src/client/'))).toBe(true);
    for (const name of serverOnly) expect(inputs.filter((input) => input.includes(`node_modules/${name}`))).toEqual([]);
    expect(await runScript(join(bundleDir, 'script.mjs'), bundleDir)).toMatchObject(expectedRun);
  });

  it("should put the built `berth` on the project's PATH", async () => {
    const { stdout } = await run(join(app, 'node_modules/.bin/berth'), ['--version']);
    expect(stdout.trim()).toBe((await import('../../package.json', { with: { type: 'json' } })).default.version);
  });
});
