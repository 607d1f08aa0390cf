/**
 * Which hosts a git import may reach. A tenant names the URL, the server makes the connection: without a policy a
 * tenant reaches what only the server can (loopback listeners, the cloud metadata service, the private network). The
 * host is resolved here and every address it resolves to must be public and not one of this machine's own, unless an
 * admin allowed the host by name or its address by subnet (BERTH_GIT_ALLOW_HOSTS). The caller then pins git to the
 * address checked here, so a second resolution by git cannot answer differently (DNS rebinding).
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { BerthError } from '../../../schemas/errors.ts';

/** Why an address is refused: the kind of range it lies in. */
export type RefusedRange = 'loopback' | 'private' | 'link_local' | 'unspecified' | 'multicast' | 'reserved' | 'own_address';

const ranges: Array<[RefusedRange, string, number]> = [
  ['unspecified', '0.0.0.0', 8],
  ['private', '10.0.0.0', 8],
  ['private', '100.64.0.0', 10], // carrier-grade NAT
  ['loopback', '127.0.0.0', 8],
  ['link_local', '169.254.0.0', 16], // cloud metadata services live here
  ['private', '172.16.0.0', 12],
  ['reserved', '192.0.0.0', 24],
  ['reserved', '192.0.2.0', 24],
  ['reserved', '192.88.99.0', 24],
  ['private', '192.168.0.0', 16],
  ['reserved', '198.18.0.0', 15],
  ['reserved', '198.51.100.0', 24],
  ['reserved', '203.0.113.0', 24],
  ['multicast', '224.0.0.0', 4],
  ['reserved', '240.0.0.0', 4], // and 255.255.255.255
  ['unspecified', '::', 128],
  ['loopback', '::1', 128],
  ['reserved', '::', 96], // IPv4-compatible (deprecated); IPv4-mapped ::ffff:0:0/96 is checked against the IPv4 ranges
  ['reserved', '64:ff9b:1::', 48],
  ['reserved', '100::', 64],
  ['reserved', '2001::', 23],
  ['reserved', '2001:db8::', 32],
  ['private', 'fc00::', 7],
  ['link_local', 'fe80::', 10],
  ['reserved', 'fec0::', 10],
  ['multicast', 'ff00::', 8],
];

const refused = new Map<RefusedRange, BlockList>();
for (const [kind, network, prefix] of ranges) {
  if (!refused.has(kind)) refused.set(kind, new BlockList());
  refused.get(kind)!.addSubnet(network, prefix, isIP(network) === 6 ? 'ipv6' : 'ipv4');
}

/** What an admin allowed: host names (exact, case-insensitive) and subnets of addresses. */
export interface GitHostAllowance {
  names: ReadonlySet<string>;
  subnets: BlockList;
}

/**
 * Compile BERTH_GIT_ALLOW_HOSTS entries: `git.internal`, `10.1.2.3`, `10.0.0.0/8`, `fd00::/8`. A name lets its
 * addresses through whatever they are; an address or subnet lets those addresses through under any name.
 */
export function gitHostAllowance(entries: readonly string[]): GitHostAllowance {
  const names = new Set<string>();
  const subnets = new BlockList();
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const [address, prefix, extra] = entry.split('/');
    const family = isIP(address);
    if (family !== 0 && extra === undefined) {
      const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix);
      if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128)) throw badEntry(raw);
      subnets.addSubnet(address, bits, family === 4 ? 'ipv4' : 'ipv6');
    } else if (HOST_NAME.test(entry)) names.add(entry);
    else throw badEntry(raw);
  }
  return { names, subnets };
}

const badEntry = (entry: string) =>
  new BerthError('invalid_request', `invalid configuration: BERTH_GIT_ALLOW_HOSTS entry ${JSON.stringify(entry)} is not a host name, address or subnet`, {
    name: 'BERTH_GIT_ALLOW_HOSTS',
  });

/** A DNS name or an IPv4 literal in any spelling getaddrinfo accepts (`127.1`, `0x7f000001`): letters, digits, dots, dashes. */
export const HOST_NAME = /^(?!-)[a-z0-9-]+(\.[a-z0-9-]+)*$/i;

/** The kind of refused range `address` lies in, or null for a public address. */
export function refusedRange(address: string): RefusedRange | null {
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  for (const [kind, list] of refused) if (list.check(address, family)) return kind;
  const nat64 = family === 'ipv6' ? embeddedNat64(address) : null;
  if (nat64 !== null) return refusedRange(nat64);
  return ownAddresses().check(address, family) ? 'own_address' : null;
}

/**
 * Resolve `host` (a name, or an address literal without brackets) and check every address it resolves to. Returns the
 * addresses to connect to, in the resolver's order; refused with environment_invalid `git_host_refused` (detail.range says why) or
 * `git_host_unresolved`. The addresses themselves are not named: they would tell a tenant the internal network's map.
 */
export async function checkGitHost(host: string, allowance: GitHostAllowance): Promise<string[]> {
  const name = host.toLowerCase();
  let addresses: string[];
  try {
    addresses = (await lookup(name, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    throw new BerthError('environment_invalid', 'The git host does not resolve.', { reason: 'git_host_unresolved', host });
  }
  if (addresses.length === 0) throw new BerthError('environment_invalid', 'The git host does not resolve.', { reason: 'git_host_unresolved', host });
  if (allowance.names.has(name)) return addresses;
  for (const address of addresses) {
    const range = refusedRange(address);
    if (range !== null && !allowance.subnets.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4')) {
      throw new BerthError('environment_invalid', `The git host is not reachable from imports: it resolves to a ${range.replace('_', '-')} address.`, {
        reason: 'git_host_refused',
        host,
        range,
      });
    }
  }
  return addresses;
}

/** This machine's own addresses, read at each check (interfaces come and go). */
function ownAddresses(): BlockList {
  const list = new BlockList();
  for (const infos of Object.values(networkInterfaces())) {
    for (const info of infos ?? []) list.addAddress(info.address.split('%')[0], info.family === 'IPv6' ? 'ipv6' : 'ipv4');
  }
  return list;
}

const nat64 = new BlockList();
nat64.addSubnet('64:ff9b::', 96, 'ipv6');

/** The IPv4 address inside a NAT64 address (64:ff9b::/96, RFC 6052), which reaches that IPv4 host. */
function embeddedNat64(address: string): string | null {
  if (!nat64.check(address, 'ipv6')) return null;
  const tail = address.slice(address.lastIndexOf(':') + 1);
  if (isIP(tail) === 4) return tail;
  const groups = address.split(':');
  const [high, low] = groups.slice(-2).map((g) => parseInt(g || '0', 16));
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}
