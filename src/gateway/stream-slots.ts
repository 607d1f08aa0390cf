/**
 * The cap on the streams (execution WebSocket and SSE, the audit feed) one token holds open at once: without it a
 * tenant pins server memory and sockets by opening streams. A slot is taken before a stream starts and given back
 * when its connection closes, however the stream ends (completed, failed, stalled, dropped, gateway closing).
 */
import type { FastifyRequest } from 'fastify';
import { BerthError } from '../../schemas/errors.ts';
import { presentedToken, tokenDigest } from './auth.ts';

/** A connection (socket or response) whose `close` ends the stream. */
export interface StreamConnection {
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

export class StreamSlots {
  /** Open streams by token digest (the map never holds a secret). */
  private readonly open = new Map<string, number>();

  constructor(private readonly perToken: number) {}

  /** Holds a slot of the request's token until `connection` closes; `too_many_streams` when it holds them all. */
  hold(request: FastifyRequest, connection: StreamConnection): void {
    const key = tokenDigest(presentedToken(request) ?? '');
    const held = this.open.get(key) ?? 0;
    if (held >= this.perToken) {
      throw new BerthError('too_many_streams', `This token already holds ${held} open streams; close one or retry later.`, {
        max_streams: this.perToken,
      });
    }
    this.open.set(key, held + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = this.open.get(key)! - 1;
      if (left === 0) this.open.delete(key);
      else this.open.set(key, left);
    };
    if (connection.destroyed) release();
    else connection.once('close', release);
  }
}
