/**
 * What a contained command sees of the host, as the server judges it before anything runs: the paths hidden from it
 * (Berth's data directory by its given path and its realpath, the tokens file, the server's home) and where its
 * working directory may be. A cwd is only changed to inside the sandbox, never bound, so it must lie in what the
 * sandbox already shows: its private /tmp, a read-only mount (/env/<slug>), or a host directory that is not hidden,
 * not inside a hidden one, and reachable by the sandbox identity.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { ReadOnlyMount } from '../provider.ts';
import { firstUnsearchable, type SandboxIdentity } from './sandbox-identity.ts';

/** Where a contained command starts, and whether bwrap makes that directory (in the private /tmp). */
export interface ConfinedCwd {
  chdir: string;
  makeChdir: boolean;
}

/** Paths the sandbox makes of its own: the host's are never what the command sees there. */
const SANDBOX_OWN = ['/tmp', '/proc', '/dev'];

const within = (p: string, dir: string): boolean => p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`);

const realOrNone = (p: string): string | undefined => {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
};

export class SandboxView {
  /** Every hidden path, by the name given and by its realpath (a link on the host must not lead around the hiding). */
  readonly hidden: string[];

  constructor(
    readonly identity: SandboxIdentity,
    hidden: string[],
  ) {
    const given = [...hidden, homedir()].filter(Boolean).map((p) => path.resolve(p));
    const all = new Set<string>();
    for (const p of given) {
      all.add(p);
      const real = realOrNone(p);
      if (real) all.add(real);
    }
    all.delete('/'); // a server whose home is / hides nothing by it
    this.hidden = [...all];
  }

  /**
   * What bwrap puts an empty directory (or /dev/null) over. A hidden path the identity cannot reach is hidden by the
   * first directory on its way that the identity cannot search (the whole directory: it could not list it anyway).
   */
  hidingTargets(): string[] {
    const targets = new Set<string>();
    for (const p of this.hidden) {
      if (!existsSync(p)) continue;
      targets.add(firstUnsearchable(p, this.identity) ?? p);
    }
    return [...targets];
  }

  /**
   * The working directory of a contained command, or a typed refusal (invalid_request, detail.reason) when it does
   * not lie in what the sandbox shows. Only the cwd as given is echoed back, never a resolved server path.
   */
  confine(cwd: string | undefined, mounts: ReadOnlyMount[] = []): ConfinedCwd {
    if (cwd === undefined) return { chdir: '/tmp', makeChdir: false };
    const refuse = (reason: string, message: string): never => {
      throw new BerthError('invalid_request', message, { reason, cwd });
    };
    if (typeof cwd !== 'string' || !path.isAbsolute(cwd) || cwd.includes('\0')) refuse('cwd_not_absolute', 'cwd is an absolute path.');
    // Checked and used as normalised: `..` cannot step out of what was checked.
    const chdir = path.posix.normalize(cwd).replace(/(.)\/$/, '$1');
    if (within(chdir, '/tmp')) return { chdir, makeChdir: chdir !== '/tmp' };
    const mount = mounts.find((m) => within(chdir, m.target));
    if (mount) {
      const inside = path.join(mount.source, path.relative(mount.target, chdir));
      const real = realOrNone(inside);
      const root = realOrNone(mount.source);
      if (!real || !root || !within(real, root) || !statSync(real).isDirectory()) {
        refuse('cwd_not_found', 'cwd is not a directory of the mounted version.');
      }
      return { chdir, makeChdir: false };
    }
    if (SANDBOX_OWN.some((d) => within(chdir, d))) refuse('cwd_not_shown', 'cwd names a directory the sandbox makes its own.');
    if (this.hidden.some((h) => within(chdir, h))) refuse('cwd_hidden', 'cwd lies in a directory hidden from contained commands.');
    const real = realOrNone(chdir);
    if (!real || !statSync(real).isDirectory()) refuse('cwd_not_found', 'cwd is not a directory on this host.');
    if (this.hidden.some((h) => within(real!, h))) refuse('cwd_hidden', 'cwd lies in a directory hidden from contained commands.');
    if (SANDBOX_OWN.some((d) => within(real!, d))) refuse('cwd_not_shown', 'cwd leads to a directory the sandbox makes its own.');
    // Searching the directory itself as well as every one on its way (a child's way passes through it).
    if (firstUnsearchable(path.join(real!, 'x'), this.identity) !== undefined) {
      refuse('cwd_unreachable', 'cwd is not reachable by the sandbox identity.');
    }
    return { chdir, makeChdir: false };
  }
}
