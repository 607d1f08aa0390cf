/**
 * The workspace file host a `berth host` serves, attacked from both ends. The view's side: links a command planted
 * (to /etc/passwd, the host's credential file, its data directory) are captured as links, never read, and an apply
 * replaces a link where it writes a file or a parent without writing through it. The wire's side (raw framed calls,
 * no client check in the way): a manifest that names a place outside the view, or a body that does not hold the
 * bytes it lists, is refused by the host itself with nothing written; a stale target is fenced before the view is
 * touched. Then a member's command in a remote Docker container: it cannot see the host's data directory, its
 * credential file, nor another tenant's container, volume or files.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocationReportSchema } from '../../schemas/events/allocation.ts';
import { frameHead } from '../../schemas/framed-body.ts';
import type { HostTarget } from '../../schemas/host-protocol.ts';
import type { TreeEntry, TreeManifest } from '../../src/providers/file-host.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { HostClient } from '../../src/providers/remote/host-client.ts';
import { RemoteFileHost } from '../../src/providers/remote/remote-file-host.ts';
import { CheckpointPacks } from '../../src/runtime/workspaces/checkpoint-packs.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { captureInto, checkpointOf, tempDir } from '../fixtures/file-host-fixture.ts';
import { remoteDockerProfile } from '../fixtures/remote-execution.ts';
import { HOST_CREDENTIAL, startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { dockerAvailable, rawDocker } from '../integration/docker-env.ts';

const SECRET = 'SECRET-OUTSIDE-THE-VIEW';

let hosts: TestHosts;
let client: HostClient;
let scratch: string;
let outside: string;
let packs: CheckpointPacks;
let made = 0;

beforeAll(async () => {
  hosts = await startHosts(['unix'], { docker: dockerAvailable });
  const config = hosts.hosts['host-unix']!.config;
  client = new HostClient({ name: 'host-unix', socketPath: config.socket!, credentialFile: config.credentialFile });
  scratch = tempDir('remote-file-host');
  outside = join(scratch, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), SECRET);
  writeFileSync(join(outside, 'victim'), 'untouched');
  packs = new CheckpointPacks(join(scratch, 'checkpoints'));
}, 120_000);

afterAll(async () => {
  client?.close();
  await hosts?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** A fresh native allocation on the host: its target and its view's directory (which the test plays the command in). */
async function allocation(): Promise<{ target: HostTarget; view: string }> {
  const id = `halloc_fh${made++}`;
  const target = { environmentId: `henv_fh${made}`, allocationId: id, requestId: `req-${id}`, generation: 1 };
  const report = await client.call('/v1/provider/allocate', { target, profile: { provider: 'remote', host: 'host-unix' } }, allocationReportSchema);
  expect(report.status).toBe('ready');
  const incarnation = (report as { identity: { incarnation: string } }).identity.incarnation;
  return { target: { ...target, incarnation }, view: join(hosts.hosts['host-unix']!.dataDir, 'host', 'views', id) };
}

/** A raw apply: the head as given and `bytes` after it. */
async function rawApply(head: object, bytes = Buffer.alloc(0)): Promise<unknown> {
  async function* body() {
    yield Buffer.concat([frameHead(head), bytes]);
  }
  return client.open('/v1/files/apply', body()).then(() => 'applied', (e: unknown) => e);
}

describe('the host\'s file host and a hostile view', () => {
  it('captures links to /etc/passwd, the credential file and the data directory as links, never their bytes', async () => {
    const { target, view } = await allocation();
    symlinkSync('/etc/passwd', join(view, 'passwd'));
    symlinkSync(hosts.credentialFile, join(view, 'credential'));
    symlinkSync(hosts.hosts['host-unix']!.dataDir, join(view, 'data'));
    const { manifest, received } = await captureInto(packs, new RemoteFileHost(client, target));
    expect(manifest.entries.map((e) => [e.path, e.type])).toEqual([
      ['credential', 'symlink'],
      ['data', 'symlink'],
      ['passwd', 'symlink'],
    ]);
    expect(received.length).toBe(0);
  });

  it('replaces a link planted where a file or a parent directory is written; nothing lands outside', async () => {
    const tree = await checkpointOf(packs, { 'a.txt': 'from the checkpoint', 'sub/': '', 'sub/new': 'new' });
    const { target, view } = await allocation();
    symlinkSync(join(outside, 'victim'), join(view, 'a.txt'));
    symlinkSync(outside, join(view, 'sub'));
    await new RemoteFileHost(client, target).apply(tree, undefined, packs.source());
    expect(readFileSync(join(outside, 'victim'), 'utf8')).toBe('untouched');
    expect(readdirSync(outside).sort()).toEqual(['secret', 'victim']);
    expect(lstatSync(join(view, 'a.txt')).isFile()).toBe(true);
    expect(readFileSync(join(view, 'a.txt'), 'utf8')).toBe('from the checkpoint');
    expect(readFileSync(join(view, 'sub/new'), 'utf8')).toBe('new');
  });

  it('refuses, on the host, manifests naming places outside the view, writing nothing', async () => {
    const good = await checkpointOf(packs, { x: 'payload' });
    const file = good.entries[0]!;
    const bad: [string, TreeEntry[]][] = [
      ['parent segment', [{ ...file, path: '../x' }]],
      ['absolute', [{ ...file, path: '/etc/x' }]],
      ['climbing', [{ path: 'a', type: 'directory', mode: 0o755, size: 0 }, { ...file, path: 'a/../../x' }]],
      ['private directory', [{ path: '.berth', type: 'directory', mode: 0o755, size: 0 }, { ...file, path: '.berth/x' }]],
      ['through a link', [{ path: 'l', type: 'symlink', mode: 0o777, size: 0, target: outside }, { ...file, path: 'l/x' }]],
      ['pack path', [{ ...file, blob: { pack: '../../../etc', offset: 0 } }]],
    ];
    const { target, view } = await allocation();
    for (const [label, entries] of bad) {
      const manifest: TreeManifest = { ...good, entries: [{ ...file, path: '0-first' }, ...entries] };
      const refused = await rawApply({ target, manifest, blobs: [] });
      expect(refused, label).toMatchObject({ code: 'invalid_request', detail: { reason: expect.any(String) } });
      expect(readdirSync(view), label).toEqual([]);
    }
    expect(existsSync('/etc/x')).toBe(false);
    expect(readdirSync(outside).sort()).toEqual(['secret', 'victim']);
  });

  it('refuses a body that does not hold exactly the bytes it lists, and a blob it never sent', async () => {
    const tree = await checkpointOf(packs, { x: 'payload' });
    const blob = { ...tree.entries[0]!.blob!, size: 7 };
    const { target, view } = await allocation();
    expect(await rawApply({ target, manifest: tree, blobs: [blob] }, Buffer.from('pay'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'blob_bytes' } });
    expect(await rawApply({ target, manifest: tree, blobs: [blob] }, Buffer.from('payload and more'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'blob_bytes' } });
    expect(await rawApply({ target, manifest: tree, blobs: [] })).toMatchObject({ code: 'invalid_request', detail: { reason: 'blob_missing' } });
    expect(readdirSync(view)).toEqual([]);
    expect(await rawApply({ target, manifest: tree, blobs: [blob] }, Buffer.from('payload'))).toBe('applied');
    expect(readFileSync(join(view, 'x'), 'utf8')).toBe('payload');
  });

  it('fences a stale generation or a foreign incarnation before the view is touched', async () => {
    const tree = await checkpointOf(packs, { x: 'payload' });
    const { target, view } = await allocation();
    for (const stale of [{ ...target, generation: 0 }, { ...target, incarnation: 'hinc_another' }]) {
      await expect(new RemoteFileHost(client, stale).apply(tree, undefined, packs.source())).rejects.toMatchObject({ code: 'stale_target' });
      await expect(captureInto(packs, new RemoteFileHost(client, stale))).rejects.toMatchObject({ code: 'stale_target' });
    }
    expect(readdirSync(view)).toEqual([]);
  });
});

describe.skipIf(!dockerAvailable)('a member\'s command in a remote Docker container', () => {
  let server: BerthServer;
  beforeAll(async () => {
    server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0' });
  }, 120_000);
  afterAll(() => server?.close());

  const profile = remoteDockerProfile;
  const run = async (token: string, environment: string, script: string) => {
    const record = await submit(server, environment, ['/bin/sh', '-c', script], {}, token);
    expect(await finished(server, record.id, token)).toMatchObject({ status: 'exited' });
    return (await server.call(`/v1/executions/${record.id}/output?stream=stdout`, { token })).text();
  };

  it('sees neither the host\'s data directory and credential, nor another tenant\'s container, volume or files', async () => {
    const host = hosts.hosts['host-unix']!;
    const [alice, bob] = [await createEnvironment(server, tokens.alice, profile), await createEnvironment(server, tokens.bob, profile)];
    expect(await run(tokens.bob, bob, 'echo bob-private > "$HOME/bob-secret"; echo done')).toBe('done\n');
    const probe = [
      `ls ${host.dataDir} ${hosts.credentialFile} 2>&1 | grep -c "No such file"`,
      `cat ${hosts.credentialFile} 2>/dev/null; echo credential-read-$?`,
      'find / -name bob-secret 2>/dev/null | wc -l',
      `grep -rl ${HOST_CREDENTIAL} /proc/*/environ 2>/dev/null | wc -l`,
      'cat /proc/mounts',
    ].join('; ');
    const out = await run(tokens.alice, alice, probe);
    const [missing, credential, found, environ, ...mounts] = out.trim().split('\n');
    expect(missing).toBe('2');
    expect(credential).toBe('credential-read-1');
    expect(found).toBe('0');
    expect(environ).toBe('0');
    expect(out).not.toContain(HOST_CREDENTIAL);
    // Bob's container and volumes are not among Alice's mounts, and nothing of the host's data directory is.
    const containerOf = async (environment: string) => {
      const [c] = await rawDocker.listContainers({ filters: { label: [`${LABEL.environmentId}=${environment}`] } });
      return rawDocker.getContainer(c!.Id).inspect();
    };
    const [mine, theirs] = [await containerOf(alice), await containerOf(bob)];
    const theirVolumes = theirs.Mounts.filter((m) => m.Type === 'volume').map((m) => m.Name!);
    expect(theirVolumes.length).toBeGreaterThan(0);
    for (const name of theirVolumes) expect(mine.Mounts.map((m) => m.Name)).not.toContain(name);
    expect(mine.Mounts.filter((m) => m.Type === 'bind' && m.Source.startsWith(host.dataDir))).toEqual([]);
    expect(mounts.join('\n')).not.toContain(host.dataDir);
  });
});
