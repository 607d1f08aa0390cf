import { describe, expect, it } from 'vitest';
import { BerthError } from '../../../schemas/errors.ts';
import { checkGitHost, gitHostAllowance, refusedRange } from '../../../src/content/import/git-host-policy.ts';
import { parseGitRemote } from '../../../src/content/import/git-remote.ts';

const reasonOf = (work: () => unknown): string | undefined => {
  try {
    work();
  } catch (e) {
    if (e instanceof BerthError) return String(e.detail.reason);
    throw e;
  }
  return undefined;
};

describe('git remote parsing and pinning', () => {
  it('should pin https to the checked address through curl, keeping the name for TLS', () => {
    const remote = parseGitRemote('https://Git.Example.com/org/repo.git', false);
    if (remote.transport === 'local') throw new Error('not local');
    expect(remote.host).toBe('git.example.com');
    expect(remote.pin(['93.184.216.34'])).toEqual({
      url: 'https://git.example.com/org/repo.git',
      config: ['-c', 'http.curloptResolve=git.example.com:443:93.184.216.34'],
      env: {},
    });
    const v6 = parseGitRemote('http://example.org:8080/r', false);
    if (v6.transport === 'local') throw new Error('not local');
    expect(v6.pin(['2606:2800::1', '93.184.216.34']).config).toEqual(['-c', 'http.curloptResolve=example.org:8080:[2606:2800::1],93.184.216.34']);
  });

  it('should rewrite ssh and git URLs to the address, ssh checking the host key under the name', () => {
    const scp = parseGitRemote('git@github.com:org/repo.git', false);
    if (scp.transport === 'local') throw new Error('not local');
    const pinned = scp.pin(['140.82.121.4']);
    expect(pinned.url).toBe('git@140.82.121.4:org/repo.git');
    expect(pinned.env.GIT_SSH_COMMAND).toMatch(/-o HostKeyAlias=github\.com -o BatchMode=yes$/);
    const git = parseGitRemote('git://example.org:9419/repo.git', false);
    if (git.transport === 'local') throw new Error('not local');
    expect(git.pin(['2001:4860::8']).url).toBe('git://[2001:4860::8]:9419/repo.git');
  });

  it('should refuse transport helpers, options as host or user, odd hosts, and local paths unless allowed', () => {
    for (const url of ['ext::sh -c id', 'fd::3', 'ssh://-oProxyCommand=id/x', 'ssh://-u@host/x', '-u@host:x', 'git@-oProxyCommand=x:y', 'http://exa_mple.com/x', 'http://host./x', 'file:///etc', '/srv/repo', 'ftp://h/x']) {
      expect(reasonOf(() => parseGitRemote(url, false)), url).toBe('git_url');
    }
    expect(parseGitRemote('/srv/repo.git', true)).toEqual({ transport: 'local', url: '/srv/repo.git' });
  });
});

describe('git host policy', () => {
  it('should name the range of internal addresses and pass public ones', () => {
    expect(refusedRange('127.0.0.1')).toBe('loopback');
    expect(refusedRange('::ffff:127.0.0.1')).toBe('loopback');
    expect(refusedRange('64:ff9b::a00:1')).toBe('private');
    expect(refusedRange('169.254.169.254')).toBe('link_local');
    expect(refusedRange('100.100.1.1')).toBe('private');
    expect(refusedRange('fd12::1')).toBe('private');
    expect(refusedRange('0.0.0.0')).toBe('unspecified');
    expect(refusedRange('239.1.1.1')).toBe('multicast');
    expect(refusedRange('93.184.216.34')).toBeNull();
    expect(refusedRange('2606:4700::1111')).toBeNull();
  });

  it('should let an allowed name or subnet through, and refuse the rest', async () => {
    await expect(checkGitHost('localhost', gitHostAllowance([]))).rejects.toMatchObject({ detail: { reason: 'git_host_refused', range: 'loopback' } });
    expect(await checkGitHost('LOCALHOST', gitHostAllowance(['localhost']))).toContain('127.0.0.1');
    expect(await checkGitHost('127.0.0.1', gitHostAllowance(['127.0.0.0/8']))).toEqual(['127.0.0.1']);
    await expect(checkGitHost('127.0.0.2', gitHostAllowance(['127.0.0.1']))).rejects.toMatchObject({ detail: { reason: 'git_host_refused' } });
    await expect(checkGitHost('no-such-host.invalid', gitHostAllowance([]))).rejects.toMatchObject({ detail: { reason: 'git_host_unresolved' } });
  });

  it('should refuse a malformed allow-list entry', () => {
    for (const entry of ['10.0.0.0/33', 'fd00::/129', 'a b', 'http://x', '10.0.0.0/8/1']) {
      expect(() => gitHostAllowance([entry]), entry).toThrow(/BERTH_GIT_ALLOW_HOSTS/);
    }
  });
});
