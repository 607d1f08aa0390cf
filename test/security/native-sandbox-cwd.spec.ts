/**
 * A contained command's cwd is only changed to, never bound: it must lie in what the sandbox shows, else POST
 * /v1/executions answers 400 invalid_request (detail.reason) and nothing is accepted or run. Each refused cwd here
 * used to be bound read-write over the hiding: the command listed and wrote the data directory, /root, and another
 * tenant's "immutable" version.
 */
import { mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokens } from '../e2e/berth-server.ts';
import { build, createNamed, expectError, putFile } from '../e2e/content-client.ts';
import { bwrap, sandboxGround, type SandboxGround } from './native-sandbox-fixture.ts';

describe.skipIf(!bwrap)("a contained command's cwd", () => {
  let g: SandboxGround;
  let bobVersion: string;
  let attempts = 0;

  beforeAll(async () => {
    g = await sandboxGround('Cwd');
    const bob = await createNamed(g.server, 'Bob Version', tokens.bob, { contain: true });
    await putFile(g.server, bob.id, 'kept.txt', 'bob\n', tokens.bob);
    expect((await build(g.server, bob.id, tokens.bob)).status).toBe('ready');
    bobVersion = join(g.dataDir, 'environments', bob.id, 'versions', '1');
    symlinkSync(g.dataDir, join(g.shown, 'to-data'));
    mkdirSync(join(g.shown, 'work'));
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  /** Submits a command that would leave a mark, and expects the refusal with its reason; nothing may be accepted. */
  const refused = async (cwd: string, reason: string) => {
    const operationId = `cwd-${process.pid}-${++attempts}`;
    const mark = `berth-cwd-mark-${attempts}`;
    const response = g.server.call('/v1/executions', {
      body: { operationId, environment: g.env.id, command: ['/bin/sh', '-c', `ls -A; echo x > ${mark}`], cwd },
      token: tokens.alice,
    });
    const detail = await expectError(response, 400, 'invalid_request');
    expect(detail).toMatchObject({ reason, cwd });
    expect(await g.server.json(`/v1/executions?operationId=${operationId}`, { token: tokens.alice })).toEqual([]);
  };

  it('refuses the data directory, by its path and through a host link to it', async () => {
    await refused(g.dataDir, 'cwd_hidden');
    await refused(join(g.dataDir, 'environments'), 'cwd_hidden');
    await refused(join(g.shown, 'to-data'), 'cwd_hidden');
    await refused(join(g.shown, 'to-data', 'environments'), 'cwd_hidden');
  });

  it("refuses another tenant's version directory, also reached with ..", async () => {
    await refused(bobVersion, 'cwd_hidden');
    await refused(`${g.shown}/../${relative(g.root, bobVersion)}`, 'cwd_hidden');
    await refused(`/tmp/../${bobVersion}`, 'cwd_hidden');
    expect(readdirSync(bobVersion)).toEqual(['kept.txt']);
  });

  it("refuses the server's home", async () => {
    await refused(process.env.HOME ?? '/root', 'cwd_hidden');
  });

  it('refuses a relative cwd and one that is not a directory here', async () => {
    const detail = await expectError(
      g.server.call('/v1/executions', { body: { operationId: `cwd-rel-${process.pid}`, environment: g.env.id, command: ['true'], cwd: 'data' }, token: tokens.alice }),
      400,
      'invalid_request',
    );
    expect(JSON.stringify(detail)).not.toContain(g.dataDir);
    await refused(join(g.shown, 'missing'), 'cwd_not_found');
    await refused('/proc/1/root', 'cwd_not_shown');
  });

  it('runs in its version, its private /tmp and a shown host directory, which stays unwritten', async () => {
    const inVersion = await g.sh('pwd; cat data.txt', { cwd: `/env/${g.env.slug}` });
    expect(inVersion.stdout).toBe(`/env/${g.env.slug}\npristine\n`);
    const inTmp = await g.sh('pwd; echo ok > here; cat here', { cwd: '/tmp/work/deep' });
    expect(inTmp.stdout).toBe('/tmp/work/deep\nok\n');
    const onHost = await g.sh('pwd; echo x > written 2>/dev/null || echo refused', { cwd: join(g.shown, 'work') });
    expect(onHost.stdout).toBe(`${join(g.shown, 'work')}\nrefused\n`);
    expect(readdirSync(join(g.shown, 'work'))).toEqual([]);
  });
});
