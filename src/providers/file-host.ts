/**
 * The file host (issue 14, seed 000 "WorkspaceMounts"): how a workspace's writable view is captured into a
 * checkpoint and how a checkpoint is materialized into a view, whatever holds the view (a host directory, a Docker
 * staging volume, later the remote Execution Host over its transport). A capture lists the tree and hands the bytes
 * of files it has not seen before to a PackWriter; an apply makes the changes from one tree to another, reading
 * bytes from a BlobSource. Both are confined to the view: no link is ever followed, special files are skipped.
 */

/** A file's bytes: `offset` in the pack `pack` (a pack is one file of concatenated blobs, written by one capture). */
export interface BlobLocation {
  pack: string;
  offset: number;
}

/** One entry of a view, as a checkpoint records it. Paths are relative, '/'-separated, sorted; the root is not listed. */
export interface TreeEntry {
  path: string;
  type: 'file' | 'directory' | 'symlink';
  /** Permission bits (0o777 at most: setuid, setgid and sticky are dropped). */
  mode: number;
  /** file: its bytes; otherwise 0. */
  size: number;
  /** file: 'sha256:<hex>' of its bytes. */
  hash?: string;
  /** file: where its bytes are. */
  blob?: BlobLocation;
  /** symlink: its target, as written (never followed by Berth). */
  target?: string;
  /**
   * A capture hint, not content: `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>` of the file when it was captured, so the
   * next capture of the same view reuses hash and blob of a file whose stat did not change (ctime cannot be set back).
   */
  stat?: string;
}

export interface TreeManifest {
  version: 1;
  entries: TreeEntry[];
  files: number;
  bytes: number;
  /** Special files (FIFOs, sockets, devices) found and not recorded. */
  skipped: number;
}

/** Names at a view's root that are never captured nor written: Berth's private `.berth` and the staged inputs. */
export const PRIVATE_ROOT_NAMES = ['.berth', '.berth-inputs'] as const;

/** The bounds of one capture; past either it fails with `quota_exceeded` (detail.quota names which) and records nothing. */
export interface CaptureLimits {
  maxEntries: number;
  maxBytes: number;
}

/** Receives the bytes of files a capture has not seen before, one blob after another. */
export interface PackWriter {
  /** The pack's name, as BlobLocation.pack records it. */
  readonly pack: string;
  /** Bytes written so far: the offset the next blob starts at. */
  readonly offset: number;
  write(bytes: Buffer): Promise<void>;
  /** Drops what was written past `offset` (a blob found to be a duplicate once hashed). */
  truncate(offset: number): Promise<void>;
}

export interface BlobSource {
  /** Reads `size` bytes of the blob at `location`, in chunks. */
  read(location: BlobLocation, size: number): AsyncIterable<Buffer>;
  /**
   * Optional, for a source on local disk: the same chunks handed to `use` before it returns, each valid only during
   * its call. An apply of thousands of small files then costs no promise per file.
   */
  readSync?(location: BlobLocation, size: number, use: (chunk: Buffer) => void): void;
}

/** Who owns what an apply writes (the command's user, so its commands can write there). */
export interface FileOwner {
  uid: number;
  gid: number;
}

export interface FileHost {
  /**
   * The view's tree now. Files whose stat hint matches `previous` keep its hash and blob; a file whose hash is known
   * from `previous` reuses that blob; every other file's bytes go to `pack`.
   */
  capture(previous: TreeManifest | undefined, pack: PackWriter, limits: CaptureLimits): Promise<TreeManifest>;
  /**
   * Makes the changes from `base` to `target` in the view (everything of `target` when `base` is undefined): writes
   * files and links that differ (to a temporary name, then renamed over), makes directories, removes what `target`
   * no longer has. What the view holds that neither mentions is left alone. Idempotent: applying again is harmless.
   * Files and directories it makes belong to `owner`.
   */
  apply(target: TreeManifest, base: TreeManifest | undefined, source: BlobSource): Promise<void>;
}
