/**
 * Writes landed archive members into a fresh staging directory. The directory holds nothing but what this writer
 * made (real files and directories, never a link), so paths are joined without lstat checks. Small files are written
 * in the background, several at a time and bounded in bytes, while the reader moves on: this is what keeps an import
 * of many small files close to `tar -x`. Parents are made once each; a repeated path is written in archive order.
 */
import { constants } from 'node:fs';
import { chmod, mkdir, open, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RoomCheck, type Room } from '../room-check.ts';

const SMALL_FILE_BYTES = 1024 * 1024;
const MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024;
const MAX_IN_FLIGHT_FILES = 64;
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

export class StagingWriter {
  /** Each landed file's size; a repeated name counts once, with its last size. */
  private readonly landed = new Map<string, number>();
  private readonly dirs = new Map<string, Promise<void>>([['', Promise.resolve()]]);
  private readonly lastWrite = new Map<string, Promise<void>>();
  private readonly pending = new Set<Promise<void>>();
  private inFlightBytes = 0;
  private failure: { error: unknown } | null = null;
  private readonly room: RoomCheck;

  constructor(
    readonly dir: string,
    room?: Room,
  ) {
    this.room = new RoomCheck(room);
  }

  async directory(rel: string): Promise<void> {
    this.check();
    await this.ensureDir(rel);
  }

  /** Write a file member (executable bits kept, nothing else of the mode). */
  async file(rel: string, mode: number, size: number, body: AsyncIterable<Buffer>): Promise<void> {
    this.check();
    const abs = path.join(this.dir, rel);
    const fileMode = mode & 0o111 ? 0o755 : 0o644;
    const parent = this.ensureDir(path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel));
    const previous = this.lastWrite.get(rel);
    if (size > SMALL_FILE_BYTES) {
      await parent;
      await previous;
      const out = await open(abs, WRITE_FLAGS, fileMode);
      try {
        for await (const chunk of body) {
          await this.room.before(chunk.length);
          await out.writeFile(chunk); // writeFile loops over short writes
        }
        if (previous) await out.chmod(fileMode);
      } finally {
        await out.close();
      }
      this.landed.set(rel, size);
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk);
    const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    while (this.pending.size >= MAX_IN_FLIGHT_FILES || this.inFlightBytes > MAX_IN_FLIGHT_BYTES) await Promise.race(this.pending);
    this.check();
    await this.room.before(bytes.length);
    this.inFlightBytes += bytes.length;
    const write = (async () => {
      await parent;
      await previous;
      await writeFile(abs, bytes, { flag: WRITE_FLAGS, mode: fileMode });
      if (previous) await chmod(abs, fileMode);
    })();
    const tracked = write.then(
      () => void this.landed.set(rel, bytes.length),
      (error) => {
        this.failure ??= { error };
      },
    ).finally(() => {
      this.inFlightBytes -= bytes.length;
      this.pending.delete(tracked);
    });
    this.pending.add(tracked);
    this.lastWrite.set(rel, write.catch(() => undefined));
  }

  /** Wait for every background write; the first failure is thrown. */
  async finish(): Promise<void> {
    await Promise.all(this.pending);
    this.check();
  }

  /** Wait for every background write, failed or not. */
  async settle(): Promise<void> {
    await Promise.allSettled(this.pending);
  }

  get files(): number {
    return this.landed.size;
  }

  get bytes(): number {
    let total = 0;
    for (const size of this.landed.values()) total += size;
    return total;
  }

  private check(): void {
    if (this.failure) throw this.failure.error;
  }

  private ensureDir(rel: string): Promise<void> {
    let made = this.dirs.get(rel);
    if (!made) {
      const parent = path.posix.dirname(rel);
      made = this.ensureDir(parent === '.' ? '' : parent).then(() =>
        mkdir(path.join(this.dir, rel), 0o755).then(
          () => undefined,
          (e: NodeJS.ErrnoException) => {
            if (e.code !== 'EEXIST') throw e;
          },
        ),
      );
      made.catch(() => undefined);
      this.dirs.set(rel, made);
    }
    return made;
  }
}
