/**
 * What a contained command sees of the host, as the server judges it before anything runs: the paths hidden from it
 * (Berth's data directory by its given path and its realpath, the tokens file, the server's home) and where its
 * working directory may be. A cwd is only changed to inside the sandbox, never bound, so it must lie in what the
 * sandbox already shows: its private /tmp, a read-only mount (/env/<slug>), or a host directory that is not hidden,
 * not inside a hidden one, and reachable by the sandbox identity.
 */
import { chmodSync, existsSync, lchownSync, lstatSync, realpathSync, statSync } from 'node:fs';
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
  private readonly ownRoot?: string;
  /** Every hidden path, by the name given and by its realpath (a link on the host must not lead around the hiding). */
  readonly hidden: string[];

  /**
   * `hidden`: paths the command must not see; the first is Berth's data directory, the one place where `reach`
   * may open a way (the server's home is added).
   */
  constructor(
    readonly identity: SandboxIdentity,
    hidden: string[],
  ) {
    this.ownRoot = hidden[0] === undefined ? undefined : path.resolve(hidden[0]);
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
   * Lets the sandbox identity reach `dir` (a version or a workspace bwrap binds: bwrap looks its source up as that
   * identity) by giving the directories on the way inside the data directory the identity's group with search only
   * (x, never r or w: nothing becomes listable or readable by it). A directory outside the data directory that blocks
   * the way is the operator's: the refusal says so (`unavailable`), nothing is changed there.
   */
  reach(dir: string): void {
    if (!this.identity.drops) return; // the server itself: its own directories are its to search
    const target = path.join(path.resolve(dir), 'x');
    const opened = new Set<string>();
    for (let blocked = firstUnsearchable(target, this.identity); blocked; blocked = firstUnsearchable(target, this.identity)) {
      const st = lstatSync(blocked);
      const own = this.ownRoot !== undefined && within(blocked, this.ownRoot) && st.uid === process.getuid?.() && !opened.has(blocked);
      opened.add(blocked);
      if (!own && (this.ownRoot === undefined || !within(target, this.ownRoot))) {
        throw new BerthError('unavailable', 'The sandbox identity cannot reach this directory: its owner must let it search the way there.', {
          reason: 'dir_unreachable',
        });
      }
      if (!own) {
        throw new BerthError('unavailable', 'The sandbox identity cannot reach the data directory: run Berth with a data directory it can search (not under /root).', {
          reason: 'data_dir_unreachable',
        });
      }
      lchownSync(blocked, st.uid, this.identity.gid);
      chmodSync(blocked, (st.mode & 0o7707) | 0o010);
    }
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
    const hidden = (p: string | undefined): boolean => p !== undefined && this.hidden.some((h) => within(p, h));
    // Hidden by its name or by where it leads on the host, even where the sandbox would show something else there.
    if (hidden(chdir) || hidden(realOrNone(chdir))) refuse('cwd_hidden', 'cwd lies in a directory hidden from contained commands.');
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
    const real = realOrNone(chdir);
    if (!real || !statSync(real).isDirectory()) refuse('cwd_not_found', 'cwd is not a directory on this host.');
    if (SANDBOX_OWN.some((d) => within(real!, d))) refuse('cwd_not_shown', 'cwd leads to a directory the sandbox makes its own.');
    // Searching the directory itself as well as every one on its way (a child's way passes through it).
    if (firstUnsearchable(path.join(real!, 'x'), this.identity) !== undefined) {
      refuse('cwd_unreachable', 'cwd is not reachable by the sandbox identity.');
    }
    return { chdir, makeChdir: false };
  }
}
