/**
 * The files of a live sandbox (`sandbox.files`): the workspace's file tools through the sandbox's open turn, paths
 * relative to the workspace root (where commands start). Reads and whole-buffer writes are retried on transient faults
 * (a write of the same bytes to the same path is idempotent); a streamed write is sent once.
 */
import type { EventFeed, Feed } from './event-feed.ts';
import type { Retry } from './retry.ts';
import type { EntryInfo, FileBytes, FileChanges, FileWritten, TurnFiles, WriteOptions } from './turn-files.ts';

/** The data of a `workspace.files_changed` event, as far as a watcher reads it. */
interface FilesChanged {
  tool: string;
  turnId: string;
  executionId?: string;
  changes: { path: string; kind: 'file' | 'directory'; before: unknown; after: unknown }[];
}

/** One path a tool call or a command changed, as `files.watch` yields it. */
export interface FileEvent {
  path: string;
  kind: 'file' | 'directory';
  change: 'created' | 'modified' | 'removed';
  /** What changed it: a file tool, or `shell` (a command, then `executionId`), or `restore`. */
  tool: string;
  turnId: string;
  executionId?: string;
}

export class SandboxFiles {
  constructor(
    private readonly tools: TurnFiles,
    private readonly retry: Retry,
    private readonly feed: () => EventFeed,
    private readonly workspaceId: string,
  ) {}

  /**
   * The changes made to the workspace from now on, by anyone (this sandbox's tools and commands, or another client's),
   * as the workspace's history records them; `under` keeps those at or below a path. `close()` ends it.
   */
  watch(options: { under?: string } = {}): Feed<FileEvent> {
    const feed = this.feed();
    const stream = `workspace-${this.workspaceId}`;
    const under = options.under?.replace(/\/+$/, '');
    const inside = (path: string) => !under || path === under || path.startsWith(`${under}/`);
    async function* changes(): AsyncGenerator<FileEvent> {
      for await (const event of feed) {
        if (event.stream !== stream || event.type !== 'workspace.files_changed') continue;
        const { changes: list, tool, turnId, executionId } = event.data as FilesChanged;
        for (const c of list) {
          if (!inside(c.path)) continue;
          const change = c.before === null ? 'created' : c.after === null ? 'removed' : 'modified';
          yield { path: c.path, kind: c.kind, change, tool, turnId, ...(executionId ? { executionId } : {}) };
        }
      }
    }
    return { close: () => feed.close(), [Symbol.asyncIterator]: changes };
  }

  /** A file's text (UTF-8). */
  async read(path: string): Promise<string> {
    return (await this.readBytes(path)).toString('utf8');
  }

  async readBytes(path: string): Promise<Buffer> {
    return (await this.retry(() => this.tools.read(path))).data;
  }

  /** Writes a file whole, making missing parent directories unless `parents: false`. */
  write(path: string, data: FileBytes, options: WriteOptions = {}): Promise<FileWritten> {
    const write = () => this.tools.write(path, data, { parents: true, ...options });
    const replayable = typeof data === 'string' || data instanceof Uint8Array;
    return replayable ? this.retry(write) : write();
  }

  /** Every entry of a directory (default: the workspace root), sorted by name. */
  list(path = ''): Promise<EntryInfo[]> {
    return this.retry(() => this.tools.list(path));
  }

  /** Whether a path exists (never following a link). */
  async exists(path: string): Promise<boolean> {
    try {
      await this.retry(() => this.tools.stat(path));
      return true;
    } catch (error) {
      if ((error as { code?: string }).code === 'not_found') return false;
      throw error;
    }
  }

  /** Removes a file, or with `recursive` a directory tree. */
  remove(path: string, options: { recursive?: boolean } = {}): Promise<FileChanges> {
    return this.retry(() => this.tools.remove(path, options));
  }

  mkdir(path: string): Promise<FileChanges> {
    return this.retry(() => this.tools.mkdir(path, { parents: true }));
  }
}
