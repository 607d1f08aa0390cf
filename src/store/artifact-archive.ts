/**
 * Where retention moves aged artifacts when the admin keeps them: a directory outside the data directory, laid out
 * like the artifact store (`<aa>/<sha256 hex>`). Confined: the directory may not resolve into the data directory,
 * and nothing is written through a link found inside it.
 */
import { constants } from 'node:fs';
import { copyFile, lstat, mkdir, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';

/** Whether `candidate` is `dir` or lies below it (lexically: resolve links first where they matter). */
export const isInside = (dir: string, candidate: string): boolean => {
  const rel = path.relative(dir, candidate);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
};

export class ArtifactArchive {
  /** `forbidden`: directories the archive must not resolve into (the data directory). */
  constructor(
    readonly root: string,
    private readonly forbidden: string[],
  ) {}

  /** The archive's own path for `digest` (whether or not it holds it). */
  pathOf(digest: string): string {
    return path.join(this.root, digest.slice(7, 9), digest.slice(7));
  }

  /** Moves the artifact file at `source` into the archive under its digest; the source is gone afterwards. */
  async moveIn(source: string, digest: string): Promise<void> {
    const dir = await this.confinedDir(digest.slice(7, 9));
    const dest = path.join(dir, digest.slice(7));
    try {
      await rename(source, dest);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
      // Another filesystem: copy without replacing anything there (content-addressed: a file already there is this one).
      await copyFile(source, dest, constants.COPYFILE_EXCL).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      await rm(source, { force: true });
    }
  }

  /** `<root>/<sub>`, made if missing, after checking that neither it nor the root is a link or leads elsewhere. */
  private async confinedDir(sub: string): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const root = await realpath(this.root);
    for (const f of this.forbidden) {
      const forbidden = await realpath(f).catch(() => path.resolve(f));
      if (isInside(forbidden, root) || isInside(root, forbidden)) {
        throw new BerthError('forbidden', 'The retention archive directory resolves into or around the data directory.', { archiveDir: this.root });
      }
    }
    const dir = path.join(root, sub);
    await mkdir(dir, { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e;
    });
    const st = await lstat(dir);
    if (!st.isDirectory() || st.isSymbolicLink()) {
      throw new BerthError('forbidden', 'The retention archive holds a link or a file where a directory belongs.', { path: dir });
    }
    return dir;
  }
}
