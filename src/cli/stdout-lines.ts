/**
 * Writing command output to stdout line by line, waiting when the pipe is full (so `berth events` over a large log
 * keeps memory flat). A reader that goes away (`berth events | head`) ends the command quietly.
 */
import { once } from 'node:events';

export class StdoutClosed extends Error {}

let closed = false;
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') closed = true;
  else throw e;
});

/** Whether `e` is stdout's reader having gone away, however it surfaced (a write of a pipe can throw it at once). */
export function isStdoutClosed(e: unknown): boolean {
  return e instanceof StdoutClosed || (e as NodeJS.ErrnoException)?.code === 'EPIPE';
}

export async function writeLine(line: string): Promise<void> {
  if (closed) throw new StdoutClosed('stdout closed');
  let flushed: boolean;
  try {
    flushed = process.stdout.write(`${line}\n`);
  } catch (e) {
    if (!isStdoutClosed(e)) throw e;
    closed = true;
    throw new StdoutClosed('stdout closed');
  }
  if (!flushed) {
    await Promise.race([once(process.stdout, 'drain'), once(process.stdout, 'close')]);
    if (closed) throw new StdoutClosed('stdout closed');
  }
}
