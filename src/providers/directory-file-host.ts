/**
 * The file host over a host directory: a directory workspace, or a Docker staging volume's mountpoint that the
 * command (another uid) writes at the same time. Capture and apply are confined to the directory (tree-capture.ts,
 * tree-apply.ts); the directory itself is opened without following its last component, and nothing above it is
 * the command's.
 */
import { closeSync, fstatSync } from 'node:fs';
import { BerthError } from '../../schemas/errors.ts';
import type { BlobSource, CaptureLimits, FileHost, FileOwner, PackWriter, TreeManifest } from './file-host.ts';
import { openDir } from './spool-dir.ts';
import { applyTree } from './tree-apply.ts';
import { TreeCapture } from './tree-capture.ts';
import { treeWatches } from './tree-watch.ts';

export class DirectoryFileHost implements FileHost {
  /** `owner`: who owns what apply writes; absent, the directory's own owner. */
  constructor(
    private readonly root: string,
    private readonly owner?: FileOwner,
  ) {}

  /** Looks only at what changed since `previous` when the view's watch vouches for it, else walks the whole tree. */
  async capture(previous: TreeManifest | undefined, pack: PackWriter, limits: CaptureLimits): Promise<TreeManifest> {
    const watch = treeWatches.of(this.root);
    return this.withRoot(async (rootFd) => {
      try {
        const tracked = previous && watch?.changedSince(previous);
        if (tracked) {
          const start = pack.offset;
          const tree = await new TreeCapture(previous, pack, limits, this.root).runChanged(rootFd, previous, tracked.changed);
          if (tree) {
            watch!.settled(tracked.epoch, tree, true);
            return tree;
          }
          await pack.truncate(start); // what the look wrote is read again by the walk
        }
        const epoch = watch?.startFull();
        const capture = new TreeCapture(previous, pack, limits, this.root, watch && { watchDir: (fd, dir) => watch.watchDir(epoch!, fd, dir) });
        const tree = await capture.run(rootFd);
        watch?.settled(epoch!, tree, !capture.linked);
        return tree;
      } catch (e) {
        watch?.reset();
        throw e;
      }
    });
  }

  async apply(target: TreeManifest, base: TreeManifest | undefined, source: BlobSource): Promise<void> {
    return this.withRoot((rootFd) => {
      const stats = fstatSync(rootFd);
      return applyTree(rootFd, this.owner ?? { uid: stats.uid, gid: stats.gid }, target, base, source);
    });
  }

  private async withRoot<T>(work: (rootFd: number) => Promise<T>): Promise<T> {
    const rootFd = openDir(this.root);
    if (rootFd === undefined) throw new BerthError('workspace_unavailable', 'The view\'s directory is missing.', {});
    try {
      return await work(rootFd);
    } finally {
      closeSync(rootFd);
    }
  }
}
