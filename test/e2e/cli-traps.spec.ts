/**
 * The CLI's traps, driven as child processes: a reader of stdout that goes away (`berth events | head -1`) ends the
 * command quietly; `berth serve` on a busy port is refused before it shows a token or writes to its data directory;
 * `--version` answers the package's version and an unknown command is one line.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv, root, spawnBerth } from '../integration/cli-process.ts';

const scratch = mkdtempSync(join(tmpdir(), 'berth-traps-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a closed stdout', () => {
  it('ends `berth events --follow` quietly once it writes again, with exit 0 and no stack', async () => {
    const dataDir = join(scratch, 'epipe');
    expect((await berth(['env', 'create', 'first', '--data-dir', dataDir])).code).toBe(0);
    const follower = spawn(process.execPath, [join(root, 'bin/berth.js'), 'events', '--follow', '--data-dir', dataDir], {
      cwd: root,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    follower.stderr.on('data', (d) => (stderr += d));
    const exited = once(follower, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    // Like `head -1`: read the first chunk, then close the pipe. Only the writes after that meet EPIPE.
    await once(follower.stdout, 'data');
    follower.stdout.destroy();
    // New events for the follower to write into the closed pipe.
    expect((await berth(['env', 'create', 'second', '--data-dir', dataDir])).code).toBe(0);
    const [code, signal] = await Promise.race([
      exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still running; stderr: ${stderr}`)), 15_000)),
    ]).finally(() => follower.kill('SIGKILL'));
    expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
  }, 60_000);
});

describe('berth serve on a busy port', () => {
  it('is refused in one line before any token, runtime id or epoch, and the same start succeeds once the port is free', async () => {
    const occupier = net.createServer();
    await new Promise<void>((resolve) => occupier.listen(0, '127.0.0.1', resolve));
    const port = (occupier.address() as net.AddressInfo).port;
    const dataDir = join(scratch, 'busy-port');
    const args = ['serve', '--data-dir', dataDir, '--port', String(port)];
    const refused = await berth(args, cleanEnv({ BERTH_DOCKER: '0' }));
    await new Promise((resolve) => occupier.close(resolve));
    expect(refused).toEqual({ code: 1, stdout: '', stderr: `berth: port 127.0.0.1:${port} is in use\n` });
    expect(existsSync(dataDir)).toBe(false);

    // What the refused start would have made: a token shown once, and the data directory with it.
    const served = spawnBerth(args, cleanEnv({ BERTH_DOCKER: '0', BERTH_LOG_LEVEL: 'warn' }));
    try {
      await served.waitForLine(/^Berth listening on /, 60_000);
      expect(served.lines[0]).toMatch(/^Admin token \(shown once/);
      expect(readdirSync(dataDir)).toEqual(expect.arrayContaining(['token', 'runtime-id']));
    } finally {
      expect(await served.stop('SIGTERM')).toBe(0);
    }
  }, 90_000);
});

describe('berth --version and an unknown command', () => {
  it('prints the version of package.json and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(await berth(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('answers an unknown command with one line and exit 2', async () => {
    expect(await berth(['frobnicate', '--x'])).toEqual({ code: 2, stdout: '', stderr: 'berth: unknown command "frobnicate" (see berth --help)\n' });
  });
});
