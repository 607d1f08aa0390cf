/**
 * Who a contained command runs as. A server running as root hands its commands to an unprivileged sandbox identity
 * (BERTH_SANDBOX_UID / BERTH_SANDBOX_GID, default 65534 = nobody) before bubblewrap starts, with no supplementary
 * groups: inside bwrap's user namespace root would keep owning every root-owned file on the host. A server running
 * as any other user runs its commands as itself (it has nothing more to drop), in the same user namespace.
 */
import { accessSync, constants, lstatSync, readFileSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import { findProgram } from '../command-env.ts';

export const DEFAULT_SANDBOX_ID = 65534;

export interface SandboxIdentity {
  uid: number;
  gid: number;
  /** The name `USER` says (passwd's, else `sandbox`). */
  name: string;
  /** True when the server is root: setpriv switches to uid/gid before bwrap. */
  drops: boolean;
}

function parseId(value: string | undefined, name: string): number {
  if (value === undefined || value === '') return DEFAULT_SANDBOX_ID;
  const n = Number(value);
  // 0 would be root again; ids above 2^32-2 do not exist.
  if (!Number.isSafeInteger(n) || n <= 0 || n >= 2 ** 32 - 1) {
    throw new BerthError('invalid_request', `${name} is a uid/gid other than 0.`, { name });
  }
  return n;
}

function passwdName(uid: number): string | undefined {
  try {
    return readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .find((f) => Number(f[2]) === uid)?.[0];
  } catch {
    return undefined;
  }
}

/** The identity contained commands of this process run as (read from `env` once per call; callers keep it). */
export function sandboxIdentity(env: NodeJS.ProcessEnv = process.env): SandboxIdentity {
  const serverUid = process.getuid?.() ?? 0;
  if (serverUid !== 0) {
    const gid = process.getgid?.() ?? serverUid;
    return { uid: serverUid, gid, name: passwdName(serverUid) ?? 'sandbox', drops: false };
  }
  const uid = parseId(env.BERTH_SANDBOX_UID, 'BERTH_SANDBOX_UID');
  const gid = parseId(env.BERTH_SANDBOX_GID, 'BERTH_SANDBOX_GID');
  return { uid, gid, name: passwdName(uid) ?? 'sandbox', drops: true };
}

/**
 * The argv prefix that becomes the identity before bwrap: setpriv (util-linux) sets real, effective and saved ids
 * and clears the supplementary groups; leaving uid 0 clears every capability. Empty when nothing is dropped.
 */
export function privilegeDropArgv(identity: SandboxIdentity): string[] {
  if (!identity.drops) return [];
  const setpriv = findProgram('setpriv');
  if (!setpriv) throw new BerthError('unavailable', 'Contained commands of a root server need setpriv (util-linux), which is not installed.', {});
  return [setpriv, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, '--clear-groups', '--'];
}

const accessible = (dir: string): boolean => {
  try {
    accessSync(dir, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Whether `identity` may search (x) directory `st` by its mode bits (no supplementary groups: it has none). */
function searchable(st: Stats, identity: SandboxIdentity): boolean {
  if (st.uid === identity.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === identity.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/**
 * The first directory on the way to `path` (an absolute, normalised path) that `identity` cannot search, or
 * undefined when it can reach `path`. Judged from the mode bits: an ACL that grants more is not seen, so callers
 * treat "unreachable" as "hide that directory whole", which stays closed either way.
 */
export function firstUnsearchable(path: string, identity: SandboxIdentity): string | undefined {
  // A server that drops nothing is the identity: the kernel answers for it, supplementary groups and ACLs included.
  const canSearch = identity.drops ? (dir: string, st: Stats) => searchable(st, identity) : (dir: string) => accessible(dir);
  const parts = path.split('/').filter(Boolean);
  let dir = '/';
  for (let i = 0; i < parts.length; i++) {
    let st: Stats;
    try {
      st = lstatSync(dir);
    } catch {
      return undefined; // a missing directory: nothing under it to reach
    }
    if (st.isDirectory() && !canSearch(dir, st)) return dir;
    dir = join(dir, parts[i]);
  }
  return undefined;
}
