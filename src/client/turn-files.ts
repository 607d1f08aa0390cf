/**
 * The file tools of one open tool turn (`berth.turns.files(session, turn)`, or `turn.files` inside
 * `berth.turns.with`): paths are relative to the workspace root. Reads return bytes with the file's byte version;
 * writes and edits may name the version they expect (`ifMatch`: a stale one is BerthApiError `stale_version`, 412,
 * and nothing is written) or `createOnly`. Files are at most 64 MiB (`file_too_large`, 413, beyond).
 */
import type { z } from 'zod';
import type { entryInfoSchema, fileChangesSchema, fileListSchema, fileWrittenJson } from '../../schemas/api.ts';
import type { HttpTransport } from './http-transport.ts';
import { collect, everyItem } from './pages.ts';

export type FileWritten = z.output<typeof fileWrittenJson>;
export type EntryInfo = z.output<typeof entryInfoSchema>;
export type FileList = z.output<typeof fileListSchema>;
export type FileChanges = z.output<typeof fileChangesSchema>;

export interface FileRead {
  data: Buffer;
  /** The whole file's byte version (pass it as `ifMatch`). */
  version: string;
  /** The whole file's size (the bytes read may be a range of it). */
  size: number;
  offset: number;
}

export interface WriteOptions {
  /** The byte version the file must still have; otherwise `stale_version` and nothing is written. */
  ifMatch?: string;
  /** Write only if the file does not exist yet (`stale_version` if it does). */
  createOnly?: boolean;
  /** Make missing parent directories. */
  parents?: boolean;
}

/** Bytes to write: a buffer or string sent whole, or a stream sent as it is produced. */
export type FileBytes = Uint8Array | string | AsyncIterable<Uint8Array>;

/** The server's limit on one file of the tools (its `file_too_large` answer names the limit in detail.max_bytes). */
export const FILE_LIMIT_BYTES = 64 * 1024 * 1024;

const OCTETS = 'application/octet-stream';

const bytesOf = (data: FileBytes) => ({ stream: typeof data === 'string' ? Buffer.from(data) : data, contentType: OCTETS });

export class TurnFiles {
  private readonly base: string;

  constructor(
    private readonly http: HttpTransport,
    readonly sessionId: string,
    readonly turnId: string,
  ) {
    this.base = `/v1/sessions/${encodeURIComponent(sessionId)}/turns/${encodeURIComponent(turnId)}/files`;
  }

  /** A file's bytes (from `offset`, at most `limit` of them) with its byte version. */
  async read(path: string, options: { offset?: number; limit?: number } = {}): Promise<FileRead> {
    const answer = await this.http.bytes(this.base, { query: { path, ...options } }, Math.min(options.limit ?? FILE_LIMIT_BYTES, FILE_LIMIT_BYTES));
    return {
      data: answer.body,
      version: answer.header('x-berth-version') ?? '',
      size: Number(answer.header('x-berth-size')),
      offset: Number(answer.header('x-berth-offset')),
    };
  }

  write(path: string, data: FileBytes, options: WriteOptions = {}): Promise<FileWritten> {
    const headers: Record<string, string> = {};
    if (options.ifMatch !== undefined) headers['if-match'] = `"${options.ifMatch}"`;
    if (options.createOnly) headers['if-none-match'] = '*';
    return this.http.json<FileWritten>('PUT', this.base, {
      query: { path, parents: options.parents === undefined ? undefined : String(options.parents) },
      bytes: bytesOf(data),
      headers,
    });
  }

  /** Replaces `oldText`, which must occur exactly once (else `invalid_request`, reason old_text_missing / old_text_not_unique). */
  edit(path: string, oldText: string, newText: string, options: { ifMatch?: string } = {}): Promise<FileWritten> {
    return this.http.json<FileWritten>('POST', `${this.base}/edit`, { body: { path, old: oldText, new: newText, ...options } });
  }

  /** One page of a directory's entries, sorted by name; `next` reads on. */
  listPage(path = '', options: { limit?: number; cursor?: string } = {}): Promise<FileList> {
    return this.http.json<FileList>('GET', `${this.base}/list`, { query: { path: path || undefined, ...options } });
  }

  /** Every entry of a directory, page after page. */
  iterate(path = '', options: { limit?: number } = {}): AsyncGenerator<EntryInfo> {
    return everyItem(async (cursor) => {
      const { entries, next } = await this.listPage(path, { ...options, ...(cursor !== undefined ? { cursor } : {}) });
      return { items: entries, ...(next !== undefined ? { next } : {}) };
    });
  }

  list(path = ''): Promise<EntryInfo[]> {
    return collect(this.iterate(path));
  }

  /** One path, never following a link (a file's entry carries its byte version). */
  stat(path: string): Promise<EntryInfo> {
    return this.http.json<EntryInfo>('GET', `${this.base}/stat`, { query: { path } });
  }

  mkdir(path: string, options: { parents?: boolean } = {}): Promise<FileChanges> {
    return this.http.json<FileChanges>('POST', `${this.base}/mkdir`, { body: { path, ...options } });
  }

  /** Removes a file, or with `recursive` a directory tree. */
  remove(path: string, options: { recursive?: boolean } = {}): Promise<FileChanges> {
    return this.http.json<FileChanges>('DELETE', this.base, {
      query: { path, recursive: options.recursive === undefined ? undefined : String(options.recursive) },
    });
  }

  /** Stages an input at `.berth-inputs/<path>`: read-only to tools and commands from then on. */
  stageInput(path: string, data: FileBytes): Promise<FileWritten> {
    return this.http.json<FileWritten>('PUT', `${this.base}/inputs`, { query: { path }, bytes: bytesOf(data) });
  }
}
