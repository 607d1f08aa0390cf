/**
 * A member's shell command in a workspace (contained) against what it must not reach: the workspace's private `.berth`,
 * the rest of the data directory the managed workspace lives in (a fake token, another tenant's workspace), the
 * staged inputs it may only read, and a `.berth` replaced by a link between two runs. Every file aimed at here is
 * readable or writable by the sandbox identity on the host: only the view keeps it out of reach. Needs bwrap.
 */
import { lstatSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapOrSkip } from '../integration/native-harness.ts';
import { BERTH_SECRET, TOKEN, workspaceGround, type WorkspaceGround } from '../integration/native-workspace-fixture.ts';

const bwrap = bwrapOrSkip();

describe.skipIf(!bwrap)("a contained command's workspace view", () => {
  let g: WorkspaceGround;
  let ws: string;
  let other: string;
  let inputs: string;

  beforeAll(async () => {
    g = await workspaceGround();
    ws = g.workspace('w-alice');
    other = g.workspace('w-bob');
    inputs = g.inputs('w-alice');
  });
  afterAll(async () => {
    await g?.close();
  });

  const view = (source = ws) => ({ source, cwd: '', inputs, hidden: ['.berth'] });
  /** What a contained command printed (stdout and stderr), and that it ran. */
  const attempt = async (script: string, source = ws): Promise<string> => {
    const { receipt, stdout, stderr } = await g.sh(g.contained, view(source), script);
    expect(receipt.error).toBeUndefined();
    return stdout + stderr;
  };

  it('does not show the workspace\'s .berth, nor let it be moved or removed', async () => {
    const out = await attempt('ls -A /workspace/.berth; cat /workspace/.berth/secret; mv /workspace/.berth /workspace/moved; rm -rf /workspace/.berth; echo done');
    expect(out).not.toContain(BERTH_SECRET);
    expect(out).toContain('done');
    expect(readFileSync(join(ws, '.berth', 'secret'), 'utf8')).toBe(`${BERTH_SECRET}\n`);
    expect(readdirSync(ws).sort()).toEqual(['.berth', '.berth-inputs']);
  });

  it('sees nothing else of the data directory the workspace lives in', async () => {
    const tries = [
      `ls -A ${g.dataDir}`,
      `cat ${g.dataDir}/token`,
      `ls -A ${ws} ${other}`,
      `cat ${other}/.berth/secret`,
      `cat /workspace/../..${g.dataDir}/token`,
      'ls -A /workspace/../..',
      // A link the command makes resolves in its own view, where the data directory is an empty directory.
      `ln -s ${g.dataDir} /workspace/to-data; cat /workspace/to-data/token; ls -A /workspace/to-data/workspaces`,
      `ln -s ../.. /workspace/up; cat /workspace/up/token`,
    ];
    const out = await attempt(tries.join('; '));
    expect(out).not.toContain(TOKEN);
    expect(out).not.toContain(BERTH_SECRET);
    // No listing of the data directory or of a workspace in it (error messages name the paths tried).
    expect(out).not.toMatch(/^(token|workspaces|inputs|spool|w-alice|w-bob|\.berth)$/m);
    // Not vacuous: the paths are right, and readable by the sandbox identity but for the view.
    expect(readFileSync(join(g.dataDir, 'token'), 'utf8')).toBe(`${TOKEN}\n`);
    expect(readFileSync(join(other, '.berth', 'secret'), 'utf8')).toBe(`${BERTH_SECRET}\n`);
  });

  it('cannot write, replace or remove its staged inputs', async () => {
    const out = await attempt(
      'echo changed > /workspace/.berth-inputs/in.txt; rm -f /workspace/.berth-inputs/in.txt; touch /workspace/.berth-inputs/new; ' +
        'chmod 600 /workspace/.berth-inputs/in.txt; mv /workspace/.berth-inputs /workspace/gone; rm -rf /workspace/.berth-inputs; cat /workspace/.berth-inputs/in.txt',
    );
    expect(out).toContain('staged input');
    expect(readdirSync(inputs)).toEqual(['in.txt']);
    expect(readFileSync(join(inputs, 'in.txt'), 'utf8')).toBe('staged input\n');
    expect(lstatSync(join(inputs, 'in.txt')).mode & 0o777).toBe(0o666);
  });

  // bwrap resolves a destination inside the sandbox being built: the tmpfs meant for .berth follows the link there
  // (or bwrap refuses to start), never onto the host, and the data directory is hidden behind its own tmpfs anyway.
  it.each([
    ['the data directory', (dataDir: string) => dataDir],
    ['the data directory, relative', (dataDir: string, dir: string) => relative(dir, dataDir)],
    ["the data directory under bwrap's old root", (dataDir: string) => `/oldroot${dataDir}`],
    ['the workspace itself', () => '.'],
  ])('does not reach the data directory through a .berth replaced by a link to %s between two runs', async (_, target) => {
    const dir = g.workspace(`w-link-${Math.random().toString(36).slice(2)}`);
    // The first run cannot replace it (it is a mount point there); the host can, as something outside a sandbox may.
    const first = await attempt('rm -rf /workspace/.berth; ln -sfn /x /workspace/.berth; echo tried', dir);
    expect(first).toContain('tried');
    expect(lstatSync(join(dir, '.berth')).isDirectory()).toBe(true);
    renameSync(join(dir, '.berth'), join(dir, 'berth-old'));
    symlinkSync(target(g.dataDir, dir), join(dir, '.berth'));

    const { receipt, stdout, stderr } = await g.sh(
      g.contained,
      view(dir),
      `cat /workspace/.berth/token; ls -A /workspace/.berth/; cat ${g.dataDir}/token; ls -A ${g.dataDir}`,
    );
    expect(stdout + stderr).not.toContain(TOKEN);
    expect(stdout).not.toMatch(/^(token|workspaces|inputs|spool)$/m);
    // Either it ran in its own view or bwrap refused to build it; the host is untouched in both.
    expect(receipt.state).toBe('exited');
    expect(readFileSync(join(g.dataDir, 'token'), 'utf8')).toBe(`${TOKEN}\n`);
    expect(readdirSync(g.dataDir).sort()).toEqual(['inputs', 'spool', 'token', 'workspaces']);
    rmSync(join(dir, '.berth'));
  });
});
