/**
 * Issue 10, finding 8, against a real `berth serve` and a real git smart-HTTP listener on loopback: a member's git
 * import reached internal listeners, and a failed import's error named the absolute data path. Now a host that
 * resolves to a loopback, private, link-local, reserved or this machine's own address is refused before git runs
 * (the listener sees no request), in every spelling; BERTH_GIT_ALLOW_HOSTS lets an admin open one; redirects are not
 * followed; git's messages reach the tenant without server paths.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startServer, type BerthServer } from '../e2e/berth-server.ts';
import { answer } from '../e2e/content-client.ts';
import { makeBareRepository, startGitHttpServer, type GitHttpServer } from './git-http-server.ts';

let repos: string;
let listener: GitHttpServer;
let strict: BerthServer;
let allowing: BerthServer;

beforeAll(async () => {
  repos = mkdtempSync(path.join(tmpdir(), 'berth-ssrf-repos-'));
  makeBareRepository(repos);
  listener = await startGitHttpServer({ projectRoot: repos });
  [strict, allowing] = await Promise.all([startServer(), startServer([], { BERTH_GIT_ALLOW_HOSTS: '127.0.0.1' })]);
});
afterAll(async () => {
  await Promise.all([strict?.close(), allowing?.close(), listener?.close()]);
  rmSync(repos, { recursive: true, force: true });
});

const importGit = async (server: BerthServer, url: string, ref?: string) => {
  const env = await createEnvironment(server);
  return answer(await server.call(`/v1/environments/${env}/import`, { body: { git: { url, ...(ref ? { ref } : {}) } } }));
};

/** Asserts a typed refusal and returns its detail; no answer ever names the data directory. */
function refusal(server: BerthServer, result: { status: number; body: any }): Record<string, any> {
  expect({ status: result.status, code: result.body?.error?.code }, JSON.stringify(result.body)).toEqual({ status: 400, code: 'environment_invalid' });
  expect(JSON.stringify(result.body)).not.toContain(server.dataDir);
  return result.body.error.detail;
}

describe('git import reaches no internal host unless an admin allows it', () => {
  it('should refuse a live git listener on 127.0.0.1 before git runs, with a typed reason', async () => {
    const url = `http://127.0.0.1:${listener.port}/project.git`;
    // The listener is real and answers git: a refusal is the policy, not a dead port. (Not execFileSync: the listener
    // runs in this process.)
    expect((await promisify(execFile)('git', ['ls-remote', url], { encoding: 'utf8' })).stdout).toMatch(/refs\/heads\/main/);
    listener.requests.length = 0;

    const detail = refusal(strict, await importGit(strict, url));
    expect(detail).toMatchObject({ reason: 'git_host_refused', host: '127.0.0.1', range: 'loopback' });
    expect(listener.requests).toEqual([]);
  });

  it('should refuse every spelling of loopback and every internal range', async () => {
    const port = listener.port;
    const own = Object.values(networkInterfaces())
      .flat()
      .filter((i) => i && !i.internal && !i.address.startsWith('fe80'))
      .map((i) => (i!.family === 'IPv6' ? `[${i!.address}]` : i!.address));
    const hosts = [
      `localhost:${port}`, `[::1]:${port}`, `0x7f000001:${port}`, `2130706433:${port}`, `127.1:${port}`, `0177.0.0.1:${port}`,
      `[::ffff:127.0.0.1]:${port}`, `[64:ff9b::7f00:1]:${port}`, `0.0.0.0:${port}`, '169.254.169.254', '10.0.0.1', '172.16.5.4',
      '192.168.1.1', '100.64.0.1', '[fd00::1]', '[fe80::1]', '224.0.0.1', ...own,
    ];
    const urls = [
      ...hosts.map((host) => `http://${host}/project.git`),
      `https://localhost:${port}/project.git`,
      `git://127.0.0.1:${port}/project.git`,
      'ssh://git@127.0.0.1/project.git',
      'git@localhost:project.git',
    ];
    for (const url of urls) expect(refusal(strict, await importGit(strict, url)).reason, url).toBe('git_host_refused');
    expect(listener.requests).toEqual([]);
  });

  it('should refuse transports and URLs that are options, and local paths', async () => {
    for (const url of ['ext::sh -c touch% /tmp/pwned', 'fd::17', 'ssh://-oProxyCommand=touch%20/tmp/pwned/x', '-oProxyCommand=x@h:p', `file://${repos}/project.git`, `${repos}/project.git`]) {
      expect(refusal(strict, await importGit(strict, url)).reason, url).toBe('git_url');
    }
  });

  it('should import the same URL once BERTH_GIT_ALLOW_HOSTS names the host', async () => {
    const result = await importGit(allowing, `http://127.0.0.1:${listener.port}/project.git`);
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body).toMatchObject({ files: 1 });
    // Allowing one address opens nothing else.
    expect(refusal(allowing, await importGit(allowing, `http://127.0.0.2:${listener.port}/project.git`)).reason).toBe('git_host_refused');
  });

  it('should not follow a redirect from an allowed host to an internal one', async () => {
    const internal = await startGitHttpServer({ projectRoot: repos, host: '127.0.0.2' });
    const redirecting = await startGitHttpServer({ redirectTo: `http://127.0.0.2:${internal.port}` });
    try {
      const detail = refusal(allowing, await importGit(allowing, `http://127.0.0.1:${redirecting.port}/project.git`));
      expect(detail.reason).toBe('git_failed');
      expect(redirecting.requests.length).toBeGreaterThan(0);
      expect(internal.requests).toEqual([]);
    } finally {
      await Promise.all([internal.close(), redirecting.close()]);
    }
  });

  it('should name no server path in a failed clone', async () => {
    const detail = refusal(allowing, await importGit(allowing, `http://127.0.0.1:${listener.port}/project.git`, 'no-such-branch'));
    expect(detail.reason).toBe('git_failed');
    expect(String(detail.stderr)).toMatch(/no-such-branch/);
    expect(String(detail.stderr)).not.toMatch(/\/tmp\/|environments|staging/);
  });
});
