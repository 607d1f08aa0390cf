/**
 * Change tracking for captures (issue 14's incremental checkpoint): what changed in a view since its last capture,
 * so the next one looks at those paths only instead of every entry (an lstat of 10,000 files costs more than the
 * whole budget of an incremental checkpoint here).
 *
 * A full capture watches each directory (its inode, through the descriptor it lists) before listing it, so any change
 * after the listing raises an event; events name the paths to look at next time. The watch vouches for a capture
 * only when nothing could have gone unseen: the queue is read synchronously (inotify.c), so a change made before
 * `changedSince` returns is in its answer; an overflowed queue, a directory created, moved or deleted, an event on a
 * watched directory itself, a name that is not UTF-8, too many changes or too many directories: each sends the next
 * capture back to a full walk, which watches afresh. Changes made through a shared mapping are seen when the mapping
 * is let go (IN_CLOSE_WRITE), as a command that exits lets go of all of them. A file with a second link is seen by
 * tree-capture.ts, which then walks in full (a write through the other name raises its event in the other directory
 * only); no link can come from outside the view, since a link never crosses a mount and the view is one. A directory
 * reached twice (a bind mount inside the view) is not watched. A mount placed over a directory of the view raises no
 * event: only the host's root can make one, and the next full walk sees it. A directory on a filesystem that may
 * change from elsewhere (NFS, CIFS, FUSE, 9p: an admin's directory workspace can sit on one, or hold one) is never
 * vouched for: inotify hears only what this kernel writes, so every capture of such a view walks in full.
 *
 * Without the addon (build/Release/berth_inotify.node, built by `npm ci`) every capture walks in full, as before.
 */
import { readFileSync } from 'node:fs';
import { loadAddon } from './addon.ts';
import type { TreeManifest } from './file-host.ts';
import { PRIVATE_ROOT_NAMES } from './file-host.ts';

interface Inotify {
  init(): number;
  addWatch(fd: number, dirFd: number): number;
  removeWatch(fd: number, wd: number): void;
  fsType(dirFd: number): number;
  drain(fd: number): (number | string)[] | number;
}

const IN_Q_OVERFLOW = 0x4000;
const IN_ISDIR = 0x40000000;
/** More paths changed than this since the last capture: a full walk costs no more than looking at each. */
export const MAX_CHANGED_PATHS = 4096;
/** A view with more directories than this is not watched (each watch pins an inode in the kernel). */
export const MAX_WATCHED_DIRS = 8192;
/** Views watched at once; the least recently captured is let go first. */
const MAX_WATCHED_TREES = 256;
/**
 * Entries (files) of the captures kept as baselines, in all views together; past it the least recently captured views
 * are let go first. Each baseline is a whole manifest (about 1 KB an entry with its stat hints): 256 views of a few
 * thousand files a member made held most of a gigabyte.
 */
export const MAX_BASELINE_ENTRIES = 50_000;
/** How often the queue is read between captures, so that it does not overflow while a command writes. */
const DRAIN_MS = 250;

/** Half the user's watches, at most 32,768: the rest stay for everything else the user runs. */
function watchBudget(): number {
  try {
    return Math.min(32_768, Math.floor(Number(readFileSync('/proc/sys/fs/inotify/max_user_watches', 'utf8')) / 2));
  } catch {
    return 8192;
  }
}

const privateAtRoot = new Set<string>(PRIVATE_ROOT_NAMES);

/** statfs magic numbers of filesystems written by this kernel only, so that inotify hears every change. */
const LOCAL_FILESYSTEMS = new Set([
  0xef53, // ext2, ext3, ext4
  0x58465342, // xfs
  0x9123683e, // btrfs
  0xf2f52010, // f2fs
  0x2fc12fc1, // zfs
  0x01021994, // tmpfs (Docker staging volumes)
  0x858458f6, // ramfs
  0x794c7630, // overlay
]);

/** One view's watch: its directories' watch descriptors and the paths changed since they were taken. */
export class TreeWatch {
  private readonly dirs = new Map<number, string>();
  private changed = new Set<string>();
  /** The capture this watch vouches for: changes since it are all in `changed`. */
  private baseline: TreeManifest | undefined;
  /** Moved by each capture that begins and by each reset: only the capture begun last may become the baseline. */
  private epoch = 0;
  /** Every directory stayed watched and every event was understood since the last full walk began. */
  private vouching = false;

  constructor(private readonly inotify: Watches) {}

  /**
   * The paths changed since `previous` was captured, with the epoch of the capture that looks at them; undefined
   * when they are not all known (walk in full).
   */
  changedSince(previous: TreeManifest): { changed: Set<string>; epoch: number } | undefined {
    this.inotify.pump();
    if (this.baseline !== previous) return undefined;
    const changed = this.changed;
    this.changed = new Set();
    this.baseline = undefined;
    return { changed, epoch: ++this.epoch };
  }

  /** A full walk begins: every watch is taken again, as the walk lists each directory. Answers the walk's epoch. */
  startFull(): number {
    this.reset();
    this.vouching = true;
    return this.epoch;
  }

  /** Before the directory open as `dirFd` (at `dir`, '' for the root) is listed by the walk of `epoch`. */
  watchDir(epoch: number, dirFd: number, dir: string): void {
    if (epoch !== this.epoch || !this.vouching) return;
    if (this.dirs.size >= MAX_WATCHED_DIRS || !this.inotify.watch(this, dirFd, dir)) this.reset();
  }

  /** Called by Watches: `dir`'s watch descriptor. */
  watched(wd: number, dir: string): void {
    this.dirs.set(wd, dir);
  }

  /**
   * The capture of `epoch` ended: it is the baseline when `sound`, every directory stayed watched and no capture of
   * the same view began since (that one decides).
   */
  settled(epoch: number, tree: TreeManifest, sound: boolean): void {
    this.inotify.pump();
    if (epoch !== this.epoch) return;
    if (sound && this.vouching) {
      this.baseline = tree;
      this.inotify.kept(this);
    } else this.reset();
  }

  /** Entries of the capture this watch vouches for (0 without one). */
  get baselineEntries(): number {
    return this.baseline?.entries.length ?? 0;
  }

  /** An event from the queue, for the directory `wd` watches. */
  event(wd: number, mask: number, name: string): void {
    const dir = this.dirs.get(wd);
    if (dir === undefined) return; // a watch let go of: its last events
    if (dir === '' && privateAtRoot.has(name)) return;
    // On the directory itself (name ''), a directory's own change, or a name a capture cannot record: walk in full.
    if (name === '' || mask & IN_ISDIR || name.includes('\uFFFD')) return this.reset();
    this.changed.add(dir === '' ? name : `${dir}/${name}`);
    if (this.changed.size > MAX_CHANGED_PATHS) this.reset();
  }

  /** Nothing vouched for: the watches are let go and the next capture walks in full. */
  reset(): void {
    for (const wd of this.dirs.keys()) this.inotify.unwatch(wd);
    this.dirs.clear();
    this.changed = new Set();
    this.baseline = undefined;
    this.vouching = false;
    this.epoch++;
  }
}

/** The process's one inotify queue (a user has 128 instances in all) and the views it watches. */
export class Watches {
  private fd: number | undefined;
  private readonly owners = new Map<number, TreeWatch>();
  private readonly trees = new Map<string, TreeWatch>();
  private readonly budget = watchBudget();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly addon: Inotify | undefined) {}

  /** Directories watched now, in all views. */
  get watching(): number {
    return this.owners.size;
  }

  /** The watch of the view at `root` (an absolute path), or undefined when changes cannot be tracked here. */
  of(root: string): TreeWatch | undefined {
    if (!this.addon) return undefined;
    let tree = this.trees.get(root);
    if (tree) this.trees.delete(root);
    else tree = new TreeWatch(this);
    this.trees.set(root, tree);
    if (this.trees.size > MAX_WATCHED_TREES) this.letGo(...this.trees.entries().next().value!);
    return tree;
  }

  watch(tree: TreeWatch, dirFd: number, dir: string): boolean {
    if (this.fd === undefined) {
      const fd = this.addon!.init();
      if (fd < 0) return false;
      this.fd = fd;
    }
    // Each directory is asked, not only the root: a view may hold a mount. (An error is negative: not local.)
    if (this.owners.size >= this.budget || !LOCAL_FILESYSTEMS.has(this.addon!.fsType(dirFd))) return false;
    const wd = this.addon!.addWatch(this.fd, dirFd);
    if (wd < 0) return false;
    const owner = this.owners.get(wd);
    // The same directory reached twice (a bind mount), in this view or another: no view can say which path changed.
    if (owner) {
      owner.reset();
      return false;
    }
    this.owners.set(wd, tree);
    tree.watched(wd, dir);
    this.timer ??= setInterval(() => this.pump(), DRAIN_MS).unref();
    return true;
  }

  /** `tree` took a baseline: the least recently captured others are let go while all of them hold too many entries. */
  kept(tree: TreeWatch): void {
    let entries = 0;
    for (const t of this.trees.values()) entries += t.baselineEntries;
    for (const [root, t] of this.trees) {
      if (entries <= MAX_BASELINE_ENTRIES) break;
      if (t === tree || t.baselineEntries === 0) continue;
      entries -= t.baselineEntries;
      this.letGo(root, t);
    }
  }

  /** A view no longer watched: its next capture walks in full. */
  private letGo(root: string, tree: TreeWatch): void {
    tree.reset();
    this.trees.delete(root);
  }

  unwatch(wd: number): void {
    if (this.fd === undefined || !this.owners.delete(wd)) return;
    this.addon!.removeWatch(this.fd, wd);
    if (this.owners.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Reads everything queued now and hands each event to its view; an overflow or a failed read resets them all. */
  pump(): void {
    if (this.fd === undefined) return;
    const events = this.addon!.drain(this.fd);
    if (typeof events === 'number') return this.resetAll();
    for (let i = 0; i < events.length; i += 3) {
      const mask = events[i + 1] as number;
      if (mask & IN_Q_OVERFLOW) return this.resetAll();
      this.owners.get(events[i] as number)?.event(events[i] as number, mask, events[i + 2] as string);
    }
  }

  private resetAll(): void {
    for (const tree of this.trees.values()) tree.reset();
  }
}

/** The process's watches: one inotify queue for every view captured here. */
export const treeWatches = new Watches(loadAddon<Inotify>('berth_inotify'));
