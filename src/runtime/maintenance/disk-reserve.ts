/**
 * The room the event store keeps on the data directory's filesystem (kubelet's eviction threshold, for one
 * filesystem): a member's workspace, uploads and command output share that filesystem with the store, and a store
 * that cannot append stops everyone. Below the reserve, members' new writes are refused (`storage_full`, by the
 * gateway) and their running commands and every build are stopped (`watch`); deletes, releases and cancels still
 * go, and an admin is exempt. Free space is statfs(2)'s, for an unprivileged writer, read at most every LOOK_MS.
 */
import { statfs } from 'node:fs/promises';
import { BerthError } from '../../../schemas/errors.ts';

const MiB = 1024 * 1024;
/** How stale a look at the free space may be: a command writing fast moves it by its speed times this. */
const LOOK_MS = 250;
/** The default reserve: 1 GiB, at most a tenth of the filesystem (a small test filesystem keeps most of itself). */
const DEFAULT_MB = 1024;
const DEFAULT_SHARE = 0.1;

export interface StorageShortage {
  freeBytes: number;
  reserveBytes: number;
}

const mib = (bytes: number) => Math.floor(bytes / MiB);

const stopped = (short: StorageShortage, what: string): string =>
  `The server's data directory had ${mib(short.freeBytes)} MiB free, under its reserve of ${mib(short.reserveBytes)} MiB: the ${what} was stopped.`;

/** What a member's command stopped under the reserve records. */
export const storageFullFailure = (short: StorageShortage): { code: string; message: string } => ({ code: 'storage_full', message: stopped(short, 'command') });

/** A build stopped under the reserve fails with this error (a build's failure is one line: the code leads it). */
export const storageFullBuild = (short: StorageShortage): string => `storage_full: ${stopped(short, 'build')}`;

export class DiskReserve {
  private seen: { at: number; freeBytes: number } | undefined;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    readonly dir: string,
    readonly reserveBytes: number,
  ) {}

  /** `reserveMb` as configured (0: none), else the default for the filesystem `dir` is on. */
  static async of(dir: string, reserveMb?: number): Promise<DiskReserve> {
    if (reserveMb !== undefined) return new DiskReserve(dir, reserveMb * MiB);
    const fs = await statfs(dir);
    return new DiskReserve(dir, Math.min(DEFAULT_MB * MiB, Math.floor(fs.blocks * fs.bsize * DEFAULT_SHARE)));
  }

  /**
   * How far below the reserve the filesystem is (or would be, once `upcomingBytes` more are written), or undefined when
   * it has room (or there is no reserve), by a look at most `maxAgeMs` old.
   */
  async shortage(maxAgeMs = LOOK_MS, upcomingBytes = 0): Promise<StorageShortage | undefined> {
    if (this.reserveBytes === 0) return undefined;
    const now = Date.now();
    if (!this.seen || now - this.seen.at >= maxAgeMs) {
      const fs = await statfs(this.dir);
      this.seen = { at: now, freeBytes: fs.bavail * fs.bsize };
    }
    const { freeBytes } = this.seen;
    return freeBytes - upcomingBytes < this.reserveBytes ? { freeBytes, reserveBytes: this.reserveBytes } : undefined;
  }

  /**
   * Throws `storage_full` when below the reserve, or when `upcomingBytes` more would take it there (by a look at most
   * `maxAgeMs` old).
   */
  async assertRoom(maxAgeMs = LOOK_MS, upcomingBytes = 0): Promise<void> {
    const short = await this.shortage(maxAgeMs, upcomingBytes);
    if (short) {
      const reserve = `its reserve of ${mib(short.reserveBytes)} MiB`;
      const why = upcomingBytes > 0 ? `: the ${mib(upcomingBytes)} MiB this would write would leave less than ${reserve}` : `, under ${reserve}`;
      throw new BerthError(
        'storage_full',
        `The server's data directory has ${mib(short.freeBytes)} MiB free${why}. New writes are refused until space is freed (delete files, workspaces or environments).`,
        { ...short, ...(upcomingBytes > 0 ? { upcomingBytes } : {}) },
      );
    }
  }

  /** Looks every LOOK_MS and calls `onShort` while below the reserve (one call at a time). */
  watch(onShort: (short: StorageShortage) => Promise<void>): void {
    if (this.reserveBytes === 0 || this.timer) return;
    let busy = false;
    this.timer = setInterval(() => {
      if (busy) return;
      busy = true;
      void this.shortage()
        .then((short) => short && onShort(short))
        .catch(() => undefined) // a look or a stop that failed is tried again at the next look
        .finally(() => (busy = false));
    }, LOOK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
