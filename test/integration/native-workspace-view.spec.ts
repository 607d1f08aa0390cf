/**
 * A native execution in a workspace (a shell command in a turn): contained, it sees the workspace writable at
 * /workspace, starts in its cwd there, and reads its staged inputs; uncontained (the admin's borrowed host), it starts
 * in the workspace's host directory. A cwd of its own next to a workspace is refused before anything is claimed.
 * Needs bwrap for the contained part: skipped visibly without it, a failure under BERTH_REQUIRE_BWRAP=1.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthError } from '../../schemas/errors.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { WORKSPACE_TARGET } from '../../src/providers/provider.ts';
import { bwrapOrSkip } from './native-harness.ts';
import { workspaceGround, type WorkspaceGround } from './native-workspace-fixture.ts';

const bwrap = bwrapOrSkip();
const asRoot = process.getuid?.() === 0;

describe('native executions in a workspace', () => {
  let g: WorkspaceGround;
  let ws: string;
  let inputs: string;

  beforeAll(async () => {
    g = await workspaceGround();
    ws = g.workspace('w-main', ['sub/dir']);
    inputs = g.inputs('w-main');
  });
  afterAll(async () => {
    await g?.close();
  });

  const view = (cwd = '') => ({ source: ws, cwd, inputs, hidden: ['.berth'] });

  it('says it takes workspace views, and who must own their files', () => {
    expect(g.provider.workspaceView).toBe('directory');
    expect(g.provider.workspaceOwner).toEqual(asRoot ? { uid: 65534, gid: 65534 } : undefined);
  });

  it.skipIf(!bwrap)('writes the workspace, contained, and the host sees the file', async () => {
    const { receipt, stdout, stderr } = await g.sh(g.contained, view(), 'pwd; echo "$HOME"; echo written > /workspace/out.txt && cat out.txt');
    expect(stderr).toBe('');
    expect(receipt.exitCode).toBe(0);
    expect(stdout).toBe(`${WORKSPACE_TARGET}\n/tmp\nwritten\n`);
    expect(readFileSync(join(ws, 'out.txt'), 'utf8')).toBe('written\n');
    if (asRoot) expect(statSync(join(ws, 'out.txt')).uid).toBe(65534);
  });

  it.skipIf(!bwrap)('reads the staged inputs and cannot write them', async () => {
    const { receipt, stdout } = await g.sh(
      g.contained,
      view(),
      'cat .berth-inputs/in.txt; echo changed > .berth-inputs/in.txt || echo write-refused; touch .berth-inputs/new || echo create-refused',
    );
    expect(receipt.exitCode).toBe(0);
    expect(stdout).toBe('staged input\nwrite-refused\ncreate-refused\n');
    expect(readFileSync(join(inputs, 'in.txt'), 'utf8')).toBe('staged input\n');
  });

  it.skipIf(!bwrap)("starts in the workspace's cwd", async () => {
    const { receipt, stdout } = await g.sh(g.contained, view('sub/dir'), 'pwd; echo here > here.txt');
    expect(receipt.exitCode).toBe(0);
    expect(stdout).toBe(`${WORKSPACE_TARGET}/sub/dir\n`);
    expect(readFileSync(join(ws, 'sub', 'dir', 'here.txt'), 'utf8')).toBe('here\n');
  });

  it("runs an uncontained command in the workspace's host directory", async () => {
    const { receipt, stdout } = await g.sh(g.uncontained, view('sub/dir'), 'pwd; echo host > host.txt');
    expect(receipt.exitCode).toBe(0);
    expect(stdout).toBe(`${join(ws, 'sub', 'dir')}\n`);
    expect(readFileSync(join(ws, 'sub', 'dir', 'host.txt'), 'utf8')).toBe('host\n');
  });

  // The version's wrapper hides the data directory the managed workspace lives in, and changes directory itself.
  it.skipIf(!bwrap)("runs an uncontained command reading a content version in the workspace's host directory", async () => {
    const version = join(g.dataDir, 'environments', 'env-host', 'versions', '1');
    mkdirSync(version, { recursive: true });
    writeFileSync(join(version, 'README'), 'version one\n');
    const versioned = g.provider.versionedCommand({
      command: ['/bin/sh', '-c', 'pwd; cat /env/demo/README; echo v > v.txt'],
      env: commandEnv(),
      profile: { provider: 'native' },
      version: { source: version, target: '/env/demo' },
      hidden: [g.dataDir],
      workspace: view('sub/dir'),
    });
    const { receipt, stdout } = await g.sh(g.uncontained, view('sub/dir'), '', { command: versioned.command, env: versioned.env });
    expect(receipt.exitCode).toBe(0);
    expect(stdout).toBe(`${join(ws, 'sub', 'dir')}\nversion one\n`);
    expect(readFileSync(join(ws, 'sub', 'dir', 'v.txt'), 'utf8')).toBe('v\n');
  });

  it('refuses a cwd of its own next to a workspace, and a workspace cwd that steps out, before claiming anything', async () => {
    const refusal = async (attempt: () => unknown): Promise<unknown> => {
      try {
        await attempt();
      } catch (e) {
        expect(e).toBeInstanceOf(BerthError);
        expect((e as BerthError).code).toBe('invalid_request');
        return (e as BerthError).detail;
      }
      throw new Error('not refused');
    };
    const contain = { provider: 'native' as const, contain: true };
    expect(await refusal(() => g.provider.admit({ cwd: '/tmp', workspace: view() }, contain))).toMatchObject({ reason: 'cwd_with_workspace' });
    expect(await refusal(() => g.provider.admit({ cwd: ws, workspace: view() }, { provider: 'native' }))).toMatchObject({ reason: 'cwd_with_workspace' });
    expect(await refusal(() => g.provider.admit({ workspace: view('sub/../../..') }, contain))).toMatchObject({ reason: 'cwd_not_confined' });
    expect(await refusal(() => g.provider.admit({ workspace: view('/etc') }, contain))).toMatchObject({ reason: 'cwd_not_confined' });
    expect(await refusal(() => g.provider.admit({ workspace: { ...view(), hidden: ['../data'] } }, contain))).toMatchObject({ reason: 'workspace_invalid' });
    g.provider.admit({ workspace: view('./sub/dir/') }, contain);

    const operationId = `wsview-refused-${process.pid}`;
    const submit = () => g.contained.submit({ operationId, command: ['true'], env: commandEnv(), stdin: false, cwd: '/tmp', workspace: view() });
    expect(await refusal(submit)).toMatchObject({ reason: 'cwd_with_workspace' });
    expect((await g.contained.status(operationId)).state).toBe('absent');
  });
});
