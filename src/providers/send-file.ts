/**
 * A file's bytes sent to a socket outside JavaScript (the berth_sendfile addon built by `npm ci`, send-file.c: copied
 * into the socket from a mapping of the file, the last chunk only once the file is checked). What the socket takes
 * at once is sent on the calling thread; the rest (a client reading slowly) on a thread of the pool. Without the
 * addon, or with two pool sends under way already (each holds a pool thread while its client reads), callers send
 * the ordinary way.
 */
import { errnoError, loadAddon } from './addon.ts';

type Outcome = [sent: number, errno: number, changed: 0 | 1];

const addon = loadAddon<{
  sendFileNow(socketFd: number, fileFd: number, offset: number, length: number, tail: number, size: bigint, mtimeNs: bigint, ctimeNs: bigint): Outcome;
  sendFile(socketFd: number, fileFd: number, offset: number, length: number, tail: number, waitMs: number, size: bigint, mtimeNs: bigint, ctimeNs: bigint): Promise<Outcome>;
}>('berth_sendfile');

/** Sends on the pool under way at once: the rest of the pool stays free for the file system calls of everyone else. */
const MAX_SENDING = 2;
/** How long a pool send waits for room in a full socket before it stops and leaves the rest to the ordinary way. */
const WAIT_MS = 20;
let sending = 0;

export const hasSendFile = (): boolean => addon !== undefined;
export const poolSendFree = (): boolean => sending < MAX_SENDING;

/** The stats a file's last bytes are sent under: they go only while the file still has them. */
export interface SentUnder {
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

/** A send's range: `length` bytes from `offset`, then the `tail` bytes after them once the file is checked. */
export interface SendRange {
  socketFd: number;
  fileFd: number;
  offset: number;
  length: number;
  tail: number;
  under: SentUnder;
}

/** How many bytes went, and whether the file had changed before its tail could go. */
export interface SendOutcome {
  sent: number;
  changed: boolean;
}

function settled([sent, errno, changed]: Outcome): SendOutcome {
  if (errno !== 0) throw errnoError(`send after ${sent} bytes`, errno);
  return { sent, changed: changed === 1 };
}

/** Sends what the socket takes now, without waiting; a socket error (the client gone) throws with its code. */
export function sendFileNow(r: SendRange): SendOutcome {
  return settled(addon!.sendFileNow(r.socketFd, r.fileFd, r.offset, r.length, r.tail, r.under.size, r.under.mtimeNs, r.under.ctimeNs));
}

/**
 * Sends on a thread of the pool (check `poolSendFree` first), waiting for room as the client reads; fewer bytes than
 * asked when the client took nothing for WAIT_MS, the file is shorter or cannot be mapped (the rest goes the ordinary
 * way).
 */
export async function sendFile(r: SendRange): Promise<SendOutcome> {
  sending++;
  try {
    return settled(await addon!.sendFile(r.socketFd, r.fileFd, r.offset, r.length, r.tail, WAIT_MS, r.under.size, r.under.mtimeNs, r.under.ctimeNs));
  } finally {
    sending--;
  }
}
