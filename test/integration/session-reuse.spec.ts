/**
 * Sessions created from a profile over the real runtime (SQLite, the native provider, the test engine's Docker
 * provider when it answers): the reuse policy picks the environment — one per scope, per workspace or per session —
 * selection allocates nothing, scopes never share, and a session's own environment goes with it.
 */
import { chmodSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, dockerEndpoint } from './docker-env.ts';

const alice: Caller = { scope: 'alice', role: 'member' };
const bob: Caller = { scope: 'bob', role: 'member' };
const native = { provider: 'native', contain: true } as const;

let dir: string;
let berth: Berth;

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-reuse-')));
  chmodSync(dir, 0o755);
  const dataDir = join(dir, 'data');
  const providers: Provider[] = [new NativeProvider({ dataDir })];
  if (dockerAvailable) providers.push(new DockerProvider({ endpoint: dockerEndpoint }));
  berth = await startBerth({ settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 }, runtimeId: 'rt_reuse', providers });
});

afterEach(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const allocations = async (caller: Caller) => (await berth.api.activeAllocations(caller)).items.length;

describe('sessions from a profile: the reuse policy selects the environment', () => {
  it('native defaults to scope reuse: sessions of one scope share one environment, another scope gets its own, nothing is allocated', async () => {
    const api = berth.api;
    const [a1, a2] = await Promise.all([api.createSession(alice, { profile: native }), api.createSession(alice, { profile: native })]);
    expect(a1.environmentId).toMatch(/^henv_/);
    expect(a2.environmentId).toBe(a1.environmentId);
    // Key order does not matter: the same profile written differently selects the same environment.
    const a3 = await api.createSession(alice, { profile: { contain: true, provider: 'native' } });
    expect(a3.environmentId).toBe(a1.environmentId);
    expect(a1.environmentReuse).toBe('scope');
    const b = await api.createSession(bob, { profile: native });
    expect(b.environmentId).not.toBe(a1.environmentId);
    await expect(api.getEnvironment(bob, a1.environmentId!)).rejects.toMatchObject({ code: 'environment_not_found' });
    expect(await allocations(alice)).toBe(0);
    // A different profile is a different environment.
    const other = await api.createSession(alice, { profile: { ...native, pidsLimit: 64 } });
    expect(other.environmentId).not.toBe(a1.environmentId);
  });

  it('workspace reuse: one environment per workspace; without a workspace it is refused before anything is made', async () => {
    const api = berth.api;
    const profile = { ...native, reuse: 'workspace' } as const;
    const [w1, w2] = [await api.createWorkspace(alice, { name: 'one' }), await api.createWorkspace(alice, { name: 'two' })];
    const s1 = await api.createSession(alice, { profile, workspaceId: w1.id });
    const s1b = await api.createSession(alice, { profile, workspaceId: w1.id });
    const s2 = await api.createSession(alice, { profile, workspaceId: w2.id });
    expect(s1b.environmentId).toBe(s1.environmentId);
    expect(s2.environmentId).not.toBe(s1.environmentId);
    // A child inherits its parent's workspace, so it shares the workspace's environment.
    const child = await api.createSession(alice, { profile, parentId: s2.id });
    expect(child.environmentId).toBe(s2.environmentId);
    const before = (await api.catalog(alice)).items.length;
    await expect(api.createSession(alice, { profile })).rejects.toMatchObject({ code: 'invalid_request', detail: { reason: 'reuse_without_workspace' } });
    expect((await api.catalog(alice)).items.length).toBe(before);
  });

  it('session reuse: each session its own environment, deleted with the session', async () => {
    const api = berth.api;
    const profile = { ...native, reuse: 'session' } as const;
    const [s1, s2] = [await api.createSession(alice, { profile }), await api.createSession(alice, { profile })];
    expect(s2.environmentId).not.toBe(s1.environmentId);
    const run = await api.submitExecution(alice, { operationId: 'op-reuse-1', session: s1.id, command: ['sh', '-c', 'echo hi'] });
    await waitFor(() => api.getExecution(alice, run.id), { what: 'the command exited', until: (x) => x.status === 'exited' });
    await api.deleteSession(alice, s1.id);
    await expect(api.getEnvironment(alice, s1.environmentId!)).rejects.toMatchObject({ code: 'environment_not_found' });
    expect((await api.getEnvironment(alice, s2.environmentId!)).id).toBe(s2.environmentId);
  });

  it('a name taken by an environment with another profile is not selected', async () => {
    const api = berth.api;
    const first = await api.createSession(alice, { profile: native });
    const env = await api.getEnvironment(alice, first.environmentId!);
    await api.deleteEnvironment(alice, env.id);
    await api.createEnvironment(alice, { name: env.name, profile: { ...native, pidsLimit: 32 } });
    await expect(api.createSession(alice, { profile: native })).rejects.toMatchObject({ code: 'environment_exists', detail: { reason: 'profile_mismatch' } });
  });

  it('a profile that is not valid is refused', async () => {
    await expect(berth.api.createSession(alice, { profile: { provider: 'nope' } as never })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it.skipIf(!dockerAvailable)('Docker defaults to session reuse', async () => {
    const profile = { provider: 'docker', image: 'berth-base:latest' } as const;
    const [s1, s2] = [await berth.api.createSession(alice, { profile }), await berth.api.createSession(alice, { profile })];
    expect(s2.environmentId).not.toBe(s1.environmentId);
    expect(s1.environmentReuse).toBe('session');
    expect(await allocations(alice)).toBe(0);
  });
});
