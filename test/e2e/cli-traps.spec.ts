/**
 * The CLI's traps, driven as child processes: a reader of stdout that goes away (`berth events | head -1`) ends the
 * command quietly.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv, root } from '../integration/cli-process.ts';

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
