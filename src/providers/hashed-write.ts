/**
 * An upload's bytes written and hashed (SHA-256) on a thread of the pool, through the berth_hashedwrite addon built
 * by `npm ci` (hashed-write.c): node's hash runs on the event loop, 3.5 ms per 4 MiB here, while the next bytes of
 * the upload wait. Without the addon there is no writer, and callers hash as they write.
 */
import { errnoError, loadAddon } from './addon.ts';

type State = { readonly hashState: unique symbol };

const addon = loadAddon<{
  hashStart(): State;
  hashedWrite(fd: number, chunks: Uint8Array[], state: State): Promise<number>;
  hashEnd(state: State): string;
}>('berth_hashedwrite');

export interface HashedWriter {
  /** Writes `chunks` in order at the descriptor's offset and hashes them; one call at a time. */
  write(fd: number, chunks: Uint8Array[]): Promise<void>;
  /** The hex SHA-256 of everything written; the writer is spent. */
  digest(): string;
}

export function hashedWriter(): HashedWriter | undefined {
  if (!addon) return undefined;
  const state = addon.hashStart();
  return {
    async write(fd, chunks) {
      const errno = await addon.hashedWrite(fd, chunks, state);
      if (errno !== 0) throw errnoError('write', errno);
    },
    digest: () => addon.hashEnd(state),
  };
}
