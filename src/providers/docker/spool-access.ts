/**
 * How the Docker executor reaches an allocation's spool (the volume's `ops/` directory): the operations it needs,
 * and the host implementation, which reads and writes the volume's mountpoint directly with spool.ts (the engine is
 * on this host and this process may write its data root). `ops/` and every operation directory belong to the
 * command's UID, so the host never follows a link there: each access goes through spool.ts's descriptors
 * (spool-dir.ts). exec-spool-access.ts does the same through the engine, as the command's user, where a link can
 * only reach what the container itself sees.
 */
import { close, write } from 'node:fs';
import type { OutputStream } from '../../../schemas/output.ts';
import type { HeldFile, OutputChunk } from '../provider.ts';
import type { FinalReceipt, Spool, SpoolState } from '../spool.ts';

export interface ReceiptFields {
  status: number | null;
  cancelled: boolean;
  timedOut: boolean;
  error?: string;
}

/** An append-only writer of one spool file (a terminal's output). */
export interface AppendSink {
  write(bytes: Buffer): void;
  close(): Promise<void>;
}

export interface SpoolAccess {
  /** Where the bytes are read: the host's filesystem, or the engine (exec). */
  readonly via: 'host' | 'exec';
  readState(operationId: string): Promise<SpoolState>;
  readReceipt(operationId: string): Promise<FinalReceipt | undefined>;
  currentSizes(operationId: string): Promise<Record<OutputStream, number>>;
  read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number): Promise<OutputChunk>;
  /** O_EXCL create of a file of the operation (its directory made first, owned by the command's user). */
  createExclusive(operationId: string, name: string, content: string): Promise<boolean>;
  readText(operationId: string, name: string): Promise<string | undefined>;
  marker(operationId: string, name: 'cancel' | 'timedout'): Promise<void>;
  hasMarker(operationId: string, name: 'cancel' | 'timedout'): Promise<boolean>;
  writeReceipt(operationId: string, receipt: ReceiptFields): Promise<void>;
  openAppend(operationId: string, name: OutputStream): Promise<AppendSink>;
  /** Resolves with the first defined result of `check`, re-run on changes (or polling), undefined after the timeout. */
  waitUntil<T>(operationId: string, check: () => Promise<T | undefined>, timeoutMs: number, subscribe?: (wake: () => void) => () => void): Promise<T | undefined>;
  release(operationId: string): Promise<void>;
}

/** The volume's mountpoint, as this host sees it. The operation directories it makes are the command's user's. */
export class HostSpoolAccess implements SpoolAccess {
  readonly via = 'host' as const;

  constructor(private readonly spool: Spool) {}

  readState(operationId: string) {
    return this.spool.readState(operationId);
  }

  readReceipt(operationId: string) {
    return this.spool.readReceipt(operationId);
  }

  currentSizes(operationId: string) {
    return this.spool.currentSizes(operationId);
  }

  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number): Promise<OutputChunk> {
    const { data, next, closed } = await this.spool.read(operationId, stream, cursor, maxBytes);
    return { data, next, closed };
  }

  holdOutput(operationId: string, stream: OutputStream): Promise<HeldFile | undefined> {
    return this.spool.holdOutput(operationId, stream);
  }

  createExclusive(operationId: string, name: string, content: string): Promise<boolean> {
    return this.spool.createExclusive(operationId, name, content);
  }

  readText(operationId: string, name: string): Promise<string | undefined> {
    return this.spool.readText(operationId, name);
  }

  marker(operationId: string, name: 'cancel' | 'timedout') {
    return this.spool.marker(operationId, name);
  }

  hasMarker(operationId: string, name: 'cancel' | 'timedout') {
    return this.spool.hasMarker(operationId, name);
  }

  writeReceipt(operationId: string, receipt: ReceiptFields) {
    return this.spool.writeReceipt(operationId, receipt);
  }

  async openAppend(operationId: string, name: OutputStream): Promise<AppendSink> {
    const fd = await this.spool.openAppend(operationId, name);
    const writeAll = async (bytes: Buffer): Promise<void> => {
      for (let done = 0; done < bytes.length; ) {
        done += await new Promise<number>((resolve, reject) => write(fd, bytes, done, bytes.length - done, null, (e, n) => (e ? reject(e) : resolve(n))));
      }
    };
    let pending: Promise<unknown> = Promise.resolve();
    return {
      // Writes are chained so the bytes land in arrival order.
      write: (bytes) => {
        pending = pending.then(() => writeAll(bytes));
      },
      close: async () => {
        try {
          await pending;
        } finally {
          await new Promise<void>((resolve, reject) => close(fd, (e) => (e ? reject(e) : resolve())));
        }
      },
    };
  }

  waitUntil<T>(operationId: string, check: () => Promise<T | undefined>, timeoutMs: number, subscribe?: (wake: () => void) => () => void) {
    return this.spool.waitUntil(operationId, check, timeoutMs, subscribe);
  }

  release(operationId: string) {
    return this.spool.release(operationId);
  }
}
