/**
 * A git URL as an import may name it, taken apart so that its host can be checked (git-host-policy.ts) and git pinned
 * to the checked address: https and http through curl's resolve list (TLS still verifies the name), ssh:// and
 * git:// by rewriting the URL to the address (ssh checks the host key under the name). Local paths and file:// only
 * when the admin allowed them. Anything else (transport helpers such as `ext::`, `fd::`, a host or user that starts
 * with `-` and would reach ssh as an option) is refused as `git_url`.
 */
import { isIP } from 'node:net';
import { BerthError } from '../../../schemas/errors.ts';
import { HOST_NAME } from './git-host-policy.ts';

export type GitRemote =
  | { transport: 'local'; url: string }
  | {
      transport: 'http' | 'ssh' | 'git';
      /** The host to resolve: a name or an address literal, without brackets. */
      host: string;
      /** What git is handed once `host` resolved to `addresses` (checked, at least one): URL, `-c` settings, environment. */
      pin(addresses: readonly string[]): PinnedRemote;
    };

export interface PinnedRemote {
  url: string;
  config: string[];
  env: Record<string, string>;
}

const USER = /^[A-Za-z0-9_][\w.-]*$/;
const SCP_LIKE = /^([^@/]+)@([^:/]+|\[[0-9A-Fa-f:.]+\]):(.+)$/;
const LOCAL_URL = /^(file:\/\/|\/)[^\s]*$/;

export function parseGitRemote(raw: string, allowLocal: boolean): GitRemote {
  if (/\s/.test(raw) || raw.startsWith('-')) throw badUrl(raw);
  if (allowLocal && LOCAL_URL.test(raw)) return { transport: 'local', url: raw };
  const scheme = /^([a-z+]+):\/\//i.exec(raw)?.[1].toLowerCase();
  if (scheme === 'https' || scheme === 'http') return httpRemote(raw);
  if (scheme === 'ssh' || scheme === 'git') return urlRemote(raw, scheme);
  const scp = scheme === undefined ? SCP_LIKE.exec(raw) : null;
  if (scp) {
    const [, user, bracketed, repoPath] = scp;
    const host = hostOf(bracketed, raw);
    if (!USER.test(user)) throw badUrl(raw);
    return { transport: 'ssh', host, pin: ([address]) => ({ url: `${user}@${literal(address)}:${repoPath}`, config: [], env: sshEnv(host) }) };
  }
  throw badUrl(raw);
}

function httpRemote(raw: string): GitRemote {
  const url = parse(raw);
  const host = hostOf(url.hostname, raw);
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  // git gets the URL as parsed here, so curl cannot read another host out of an odd spelling.
  const href = url.href;
  return {
    transport: 'http',
    host,
    // Every checked address, so curl can still fall back from one family to the other.
    pin: (addresses) => ({ url: href, config: isIP(host) ? [] : ['-c', `http.curloptResolve=${host}:${port}:${addresses.map(literal).join(',')}`], env: {} }),
  };
}

function urlRemote(raw: string, scheme: 'ssh' | 'git'): GitRemote {
  const url = parse(raw);
  const host = hostOf(url.hostname, raw);
  if (url.username && !USER.test(decodeURIComponent(url.username))) throw badUrl(raw);
  if (url.password || url.hash) throw badUrl(raw);
  const user = url.username ? `${url.username}@` : '';
  const port = url.port ? `:${url.port}` : '';
  return {
    transport: scheme,
    host,
    pin: ([address]) => ({
      url: `${scheme}://${user}${literal(address)}${port}${url.pathname}${url.search}`,
      config: [],
      env: scheme === 'ssh' ? sshEnv(host) : {},
    }),
  };
}

/** ssh connects to the address and checks the host key recorded for the name; it never prompts. */
function sshEnv(host: string): Record<string, string> {
  return { GIT_SSH_COMMAND: `${process.env.GIT_SSH_COMMAND ?? 'ssh'} -o HostKeyAlias=${host} -o BatchMode=yes`, GIT_SSH_VARIANT: 'ssh' };
}

function parse(raw: string): URL {
  try {
    return new URL(raw);
  } catch {
    throw badUrl(raw);
  }
}

/** The host without brackets; a name must be plain (letters, digits, dots, dashes), an IPv6 literal bracketed. */
function hostOf(spelled: string, raw: string): string {
  const host = spelled.startsWith('[') && spelled.endsWith(']') ? spelled.slice(1, -1) : spelled;
  if (isIP(host) === 6 ? !spelled.startsWith('[') : !HOST_NAME.test(host)) throw badUrl(raw);
  return host;
}

const literal = (address: string) => (isIP(address) === 6 ? `[${address}]` : address);

const badUrl = (url: string) =>
  new BerthError('environment_invalid', 'The git URL is not an allowed https, http, ssh or git URL.', { reason: 'git_url', url });
