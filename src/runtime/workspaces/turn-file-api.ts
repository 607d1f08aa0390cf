/**
 * The file tools of a turn as the runtime API offers them (read, write with a byte-version precondition, edit,
 * list, stat, mkdir, remove, and stage for inputs): each is one admitted call of the turn (turn-service.ts), and
 * each mutation lands in the workspace history with the turn that made it.
 */
import type { Caller } from '../caller.ts';
import type { TurnService } from './turn-service.ts';
import type { EntryInfo, FileBytes, FileChange, StreamedRead } from './workspace-files.ts';

export interface FileRead {
  data: Buffer;
  size: number;
  version: string;
  offset: number;
}

/** A streamed read as the caller gets it (the call's end is the turn's to wait for). */
export type FileStreamed = Omit<StreamedRead, 'done'>;

export interface FileWritten {
  path: string;
  size: number;
  version: string;
}

export class TurnFileApi {
  constructor(private readonly turns: TurnService) {}

  read(caller: Caller, sessionId: string, turnId: string, path: string, opts: { offset?: number; limit?: number } = {}): Promise<FileRead> {
    return this.turns.tool(caller, sessionId, turnId, 'read', async (f) => ({ value: await f.read(path, opts), changes: [] }));
  }

  /**
   * As `read`, the bytes of a large file whose version is known as a stream from the file (the HTTP tool sends them
   * as they are read); the call counts in the turn until the stream has ended.
   */
  readStream(caller: Caller, sessionId: string, turnId: string, path: string, opts: { offset?: number; limit?: number } = {}): Promise<FileStreamed> {
    return this.turns.tool(caller, sessionId, turnId, 'read', async (f) => {
      const { done, ...read } = await f.readStream(path, opts);
      return { value: read, changes: [], settled: done };
    });
  }

  write(caller: Caller, sessionId: string, turnId: string, path: string, data: FileBytes, opts: { ifMatch?: string; parents?: boolean } = {}): Promise<FileWritten> {
    return this.turns.tool(caller, sessionId, turnId, 'write', async (f) => written(await f.write(path, data, opts)));
  }

  edit(caller: Caller, sessionId: string, turnId: string, path: string, oldText: string, newText: string, opts: { ifMatch?: string } = {}): Promise<FileWritten> {
    return this.turns.tool(caller, sessionId, turnId, 'edit', async (f) => written(await f.edit(path, oldText, newText, opts)));
  }

  list(caller: Caller, sessionId: string, turnId: string, path: string, opts: { limit?: number; cursor?: string } = {}): Promise<{ entries: EntryInfo[]; next?: string }> {
    return this.turns.tool(caller, sessionId, turnId, 'list', async (f) => ({ value: await f.list(path, opts), changes: [] }));
  }

  stat(caller: Caller, sessionId: string, turnId: string, path: string): Promise<EntryInfo & { version?: string }> {
    return this.turns.tool(caller, sessionId, turnId, 'stat', async (f) => ({ value: await f.stat(path), changes: [] }));
  }

  mkdir(caller: Caller, sessionId: string, turnId: string, path: string, opts: { parents?: boolean } = {}): Promise<{ changes: FileChange[] }> {
    return this.turns.tool(caller, sessionId, turnId, 'mkdir', async (f) => {
      const { changes } = await f.mkdir(path, opts);
      return { value: { changes }, changes };
    });
  }

  remove(caller: Caller, sessionId: string, turnId: string, path: string, opts: { recursive?: boolean } = {}): Promise<{ changes: FileChange[] }> {
    return this.turns.tool(caller, sessionId, turnId, 'remove', async (f) => {
      const { changes } = await f.remove(path, opts);
      return { value: { changes }, changes };
    });
  }

  /** Stages an input at `.berth-inputs/<path>`: read-only to every other tool and to commands. */
  stage(caller: Caller, sessionId: string, turnId: string, path: string, data: FileBytes): Promise<FileWritten> {
    return this.turns.tool(caller, sessionId, turnId, 'stage', async (f) => written(await f.stage(path, data)));
  }
}

const written = (r: { version: string; size: number; change: FileChange }) => ({
  value: { path: r.change.path, size: r.size, version: r.version },
  changes: [r.change],
});
