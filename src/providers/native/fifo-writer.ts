/**
 * The host's end of an operation's stdin FIFO, given as a descriptor the spool opened read-write and non-blocking
 * (Spool.openFifo: never through a link, a FIFO only): the open never waits for the command, and the command's own
 * open for reading stops waiting as soon as this writer exists. Closing it is the command's EOF; so is the runtime
 * dying.
 */
import { Socket } from 'node:net';

export class FifoWriter {
  private readonly socket: Socket;
  private failure?: Error;

  constructor(fd: number) {
    this.socket = new Socket({ fd, readable: false, writable: true });
    this.socket.on('error', (e) => {
      this.failure = e;
    });
  }

  /** Resolves once the bytes are in the pipe (the command may read them later); waits while the pipe is full. */
  write(bytes: Buffer): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.socket.write(bytes, (e) => (e ? reject(e) : resolve())));
  }

  end(): Promise<void> {
    if (this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.socket.end(resolve));
  }

  /** The command is gone: pending writes fail instead of waiting for a reader that will never come. */
  destroy(): void {
    this.socket.destroy(new Error('the command has exited'));
  }
}
