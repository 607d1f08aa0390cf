/**
 * A file's bytes sent to a socket by the kernel (sendfile(2) on a thread of the pool, through the berth_sendfile
 * addon built by `npm ci`): from the page cache to the socket, never through JavaScript. Without the addon, or with
 * two sends under way already (each holds a pool thread while its client reads), callers send the ordinary way.
 */
import { constants } from 'node:os';
import { loadAddon } from './addon.ts';

const addon = loadAddon<{ sendFile(socketFd: number, fileFd: number, offset: number, length: number, waitMs: number): Promise<[number, number]> }>('berth_sendfile');

/** Sends under way at once: the rest of the pool stays free for the file system calls of everyone else. */
const MAX_SENDING = 2;
/** How long a send waits for room in a full socket before it stops and leaves the rest to the ordinary way. */
const WAIT_MS = 20;
let sending = 0;

export const canSendFile = (): boolean => addon !== undefined && sending < MAX_SENDING;

/**
 * Sends up to `length` bytes of `fileFd` from `offset` to `socketFd`; answers how many went. Fewer when the client
 * stopped taking them for WAIT_MS or the file is shorter; a socket error (the client gone) throws with its code.
 */
export async function sendFile(socketFd: number, fileFd: number, offset: number, length: number): Promise<number> {
  sending++;
  try {
    const [sent, errno] = await addon!.sendFile(socketFd, fileFd, offset, length, WAIT_MS);
    if (errno === 0) return sent;
    const code = Object.entries(constants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
    throw Object.assign(new Error(`sendfile: ${code} after ${sent} bytes`), { code });
  } finally {
    sending--;
  }
}
