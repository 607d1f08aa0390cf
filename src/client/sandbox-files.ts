/**
 * The files of a live sandbox (`sandbox.files`): the workspace's file tools through the sandbox's open turn, paths
 * relative to the workspace root (where commands start). Reads and whole-buffer writes are retried on transient faults
 * (a write of the same bytes to the same path is idempotent); a streamed write is sent once.
 */
import type { BackoffOptions } from './reconnect-backoff.ts';
import { retrying } from './retry.ts';
import type { EntryInfo, FileBytes, FileChanges, FileWritten, TurnFiles, WriteOptions } from './turn-files.ts';

export class SandboxFiles {
  constructor(
    private readonly tools: TurnFiles,
    private readonly backoff: BackoffOptions | undefined,
  ) {}

  /** A file's text (UTF-8). */
  async read(path: string): Promise<string> {
    return (await this.readBytes(path)).toString('utf8');
  }

  async readBytes(path: string): Promise<Buffer> {
    return (await retrying(() => this.tools.read(path), this.backoff)).data;
  }

  /** Writes a file whole, making missing parent directories unless `parents: false`. */
  write(path: string, data: FileBytes, options: WriteOptions = {}): Promise<FileWritten> {
    const write = () => this.tools.write(path, data, { parents: true, ...options });
    const replayable = typeof data === 'string' || data instanceof Uint8Array;
    return replayable ? retrying(write, this.backoff) : write();
  }

  /** Every entry of a directory (default: the workspace root), sorted by name. */
  list(path = ''): Promise<EntryInfo[]> {
    return retrying(() => this.tools.list(path), this.backoff);
  }

  /** Whether a path exists (never following a link). */
  async exists(path: string): Promise<boolean> {
    try {
      await retrying(() => this.tools.stat(path), this.backoff);
      return true;
    } catch (error) {
      if ((error as { code?: string }).code === 'not_found') return false;
      throw error;
    }
  }

  /** Removes a file, or with `recursive` a directory tree. */
  remove(path: string, options: { recursive?: boolean } = {}): Promise<FileChanges> {
    return retrying(() => this.tools.remove(path, options), this.backoff);
  }

  mkdir(path: string): Promise<FileChanges> {
    return retrying(() => this.tools.mkdir(path, { parents: true }), this.backoff);
  }
}
