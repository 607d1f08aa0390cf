/** BERTH_REMOTE_HOSTS: the admin's Execution Hosts, read from a JSON file and refused whole, naming every bad entry. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveRemoteHosts } from '../../../src/runtime/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-remote-hosts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const file = (content: unknown) => {
  const path = join(dir, `hosts-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
};

describe('resolveRemoteHosts', () => {
  it('is empty when unset, and reads sockets and https URLs', () => {
    expect(resolveRemoteHosts({})).toEqual([]);
    const hosts = [
      { name: 'local', socket: '/run/berth/host.sock', credentialFile: '/etc/berth/cred' },
      { name: 'worker1', url: 'https://worker1:7430', credentialFile: '/etc/berth/cred', caFile: '/etc/berth/ca.pem' },
    ];
    expect(resolveRemoteHosts({ BERTH_REMOTE_HOSTS: file(hosts) })).toEqual([
      { name: 'local', socketPath: '/run/berth/host.sock', credentialFile: '/etc/berth/cred' },
      hosts[1],
    ]);
  });

  it.each([
    ['plain http', [{ name: 'a', url: 'http://worker1:7430', credentialFile: '/c' }], /https/],
    ['both url and socket', [{ name: 'a', url: 'https://w:1', socket: '/s', credentialFile: '/c' }], /exactly one of url and socket/],
    ['neither', [{ name: 'a', credentialFile: '/c' }], /exactly one of url and socket/],
    ['a relative credential path', [{ name: 'a', socket: '/s', credentialFile: 'cred' }], /absolute path/],
    ['a name profiles cannot spell', [{ name: 'Worker_1', socket: '/s', credentialFile: '/c' }], /\[a-z0-9-\]/],
    ['two hosts of one name', [{ name: 'a', socket: '/s', credentialFile: '/c' }, { name: 'a', socket: '/t', credentialFile: '/c' }], /distinct/],
    ['an unknown field', [{ name: 'a', socket: '/s', credentialFile: '/c', token: 'x' }], /BERTH_REMOTE_HOSTS/],
    ['not JSON', '[{', /cannot read/],
  ])('refuses %s with invalid_request', (_what, content, message) => {
    expect(() => resolveRemoteHosts({ BERTH_REMOTE_HOSTS: file(content) })).toThrow(expect.objectContaining({ code: 'invalid_request', message: expect.stringMatching(message) }));
  });
});
