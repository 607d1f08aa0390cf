/**
 * `berth run ENV -- CMD…` as a user types it: output streamed to this process's stdout and stderr, the command's
 * exit code passed through, a repeated --operation-id re-attached instead of run twice, usage errors explained.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth } from './cli-process.ts';

describe('berth run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-cli-run-'));
  const marker = join(dir, 'ran');
  beforeAll(async () => {
    const created = await berth(['env', 'create', '--data-dir', dir, 'runner']);
    expect(created.code, created.stderr).toBe(0);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('should stream stdout and stderr and exit with the command code', async () => {
    const r = await berth(['run', '--data-dir', dir, 'runner', '--', 'sh', '-c', 'echo to-out; echo to-err >&2; exit 7']);
    expect(r.code).toBe(7);
    expect(r.stdout).toBe('to-out\n');
    expect(r.stderr).toContain('to-err\n');
  });

  it('should re-attach to a repeated --operation-id instead of running the command again', async () => {
    const args = ['run', '--data-dir', dir, '--operation-id', 'once', 'runner', '--', 'sh', '-c', `echo x >> ${marker}; echo done`];
    const first = await berth(args);
    const second = await berth(args);
    expect([first.code, second.code]).toEqual([0, 0]);
    expect(second.stdout).toBe('done\n');
    expect(readFileSync(marker, 'utf8')).toBe('x\n');
  });

  it('should explain a missing command with the usage and exit 2', async () => {
    const r = await berth(['run', '--data-dir', dir, 'runner']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/name one environment, then -- and the command/);
  });
});
