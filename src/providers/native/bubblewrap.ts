/**
 * Bubblewrap containment for native commands (profile `contain: true`): the argv prefix that makes the root
 * read-only, the workspace writable, /tmp private, read-only mounts (/env/<slug>) visible, Berth's own files
 * hidden, and the network absent when the profile says `network: 'none'`. bwrap is started by the supervisor, so
 * `--die-with-parent` ties the sandbox to the supervisor, never to the Berth runtime.
 */
import { accessSync, constants, lstatSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ReadOnlyMount } from '../provider.ts';
import { DEFAULT_PATH } from '../command-env.ts';

export interface Containment {
  /** The command's working directory, bound writable (the workspace); none: cwd is the private /tmp. */
  workspace?: string;
  mounts?: ReadOnlyMount[];
  network?: 'none' | 'bridge';
  /** Host paths the command must not see (the Berth data dir, control sockets): replaced by empty ones. */
  hidden?: string[];
  /** Directories bound writable at another path (a build's version directory at /env/<slug>). */
  binds?: ReadOnlyMount[];
  /**
   * Keep the host as writable as without bubblewrap (an uncontained native profile that only needs its read-only
   * mounts): root entries and /tmp are bound read-write, /dev is the host's; hidden paths and mounts still apply.
   */
  hostWritable?: boolean;
  /** Working directory inside the sandbox (default: the workspace, else /tmp). */
  chdir?: string;
}

/** Daemon sockets stay connectable on a read-only bind, so they are hidden outright. */
export const CONTROL_SOCKETS = ['/run/docker.sock', '/var/run/docker.sock', '/run/containerd/containerd.sock'];

/** The bwrap binary on PATH, or undefined when bubblewrap is not installed. */
export function findBubblewrap(path = process.env.PATH || DEFAULT_PATH): string | undefined {
  for (const dir of path.split(':').filter(Boolean)) {
    const candidate = join(dir, 'bwrap');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

const exists = (path: string): boolean => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

/**
 * The host root, entry by entry, read-only. Binding `/` whole would leave no writable parent in which to create
 * mount points such as /env; this way the sandbox root is bwrap's tmpfs, remounted read-only at the end.
 */
function rootArgs(writable = false): string[] {
  const args: string[] = [];
  for (const entry of readdirSync('/', { withFileTypes: true })) {
    const path = `/${entry.name}`;
    if (path === '/dev' || path === '/proc' || path === '/tmp') continue;
    if (entry.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
    else if (entry.isDirectory() || entry.isFile()) args.push(writable ? '--bind' : '--ro-bind', path, path);
  }
  return args;
}

/** `bwrap <args> --`: prepend to the command's argv. */
export function bubblewrapArgv(bwrap: string, c: Containment): string[] {
  const args = c.hostWritable
    ? [bwrap, ...rootArgs(true), '--dev-bind', '/dev', '/dev', '--proc', '/proc', '--bind', '/tmp', '/tmp']
    : [bwrap, ...rootArgs(), '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  for (const path of [...(c.hidden ?? []), ...CONTROL_SOCKETS].filter(exists)) {
    if (statSync(path).isDirectory()) args.push('--tmpfs', path);
    else args.push('--ro-bind', '/dev/null', path);
  }
  for (const m of c.mounts ?? []) args.push('--ro-bind', m.source, m.target);
  for (const b of c.binds ?? []) args.push('--bind', b.source, b.target);
  if (c.workspace && c.workspace !== '/' && !c.hostWritable) args.push('--bind', c.workspace, c.workspace);
  args.push('--remount-ro', '/');
  // A private pid namespace: when the command ends, the kernel ends every process it left, escaped sessions included.
  args.push('--unshare-pid', '--die-with-parent');
  if (c.network === 'none') args.push('--unshare-net');
  args.push('--chdir', c.chdir ?? c.workspace ?? '/tmp', '--');
  return args;
}
