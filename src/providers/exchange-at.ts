/**
 * Two names of one directory swapped in one step (renameat2 with RENAME_EXCHANGE, through the berth_rename addon
 * built by `npm ci`), which node cannot do.
 */
import { loadAddon } from './addon.ts';

const addon = loadAddon<{ exchangeAt(dirFd: number, a: string, b: string): number }>('berth_rename');

/**
 * Swaps the entries `a` and `b` of the directory open as `dirFd`: true when swapped; false when either is missing,
 * the filesystem cannot swap, or the addon was not built (the caller then renames).
 */
export function exchangeAt(dirFd: number, a: string, b: string): boolean {
  return addon?.exchangeAt(dirFd, a, b) === 0;
}
