/**
 * The pace of each member token's requests (DESIGN §13: a tenant must not exhaust the server for others). Each token
 * has a bucket of `burst` requests refilled at `perSecond`; a request finding it empty is `rate_limited` (429, with
 * Retry-After) before its body is read or anything is done, so it costs the server next to nothing and may be sent
 * again as it was. Admins are trusted and not counted. Buckets are keyed by the caller authentication found, one
 * object per configured token (so the token is not hashed a second time), and exist only for known tokens: unknown
 * ones cannot grow the map.
 */
import type { FastifyInstance } from 'fastify';
import { BerthError } from '../../schemas/errors.ts';
import type { Caller } from '../runtime/runtime-api.ts';
import { isMember } from '../runtime/role-policy.ts';

interface Bucket {
  /** Requests it may still admit at `at` (fractional: it refills continuously). */
  level: number;
  at: number;
}

export class RequestRate<K> {
  private readonly buckets = new Map<K, Bucket>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** Admits one request of `key` (0), or answers how many milliseconds until one would be admitted. */
  take(key: K, now = performance.now()): number {
    const bucket = this.buckets.get(key) ?? { level: this.burst, at: now };
    bucket.level = Math.min(this.burst, bucket.level + ((now - bucket.at) * this.perSecond) / 1000);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.level >= 1) {
      bucket.level -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.level) * 1000) / this.perSecond);
  }
}

/** Registered after authentication (the caller is known) and before anything reads the body or acts. */
export function installRequestRate(app: FastifyInstance, limits: { requestsPerSecond: number; requestBurst: number }): void {
  if (limits.requestsPerSecond <= 0) return;
  const rate = new RequestRate<Caller>(limits.requestsPerSecond, Math.max(1, limits.requestBurst));
  app.addHook('onRequest', async (request, reply) => {
    if (!request.caller || !isMember(request.caller)) return;
    const waitMs = rate.take(request.caller);
    if (waitMs === 0) return;
    reply.header('retry-after', String(Math.ceil(waitMs / 1000)));
    throw new BerthError('rate_limited', `This token sends more than ${limits.requestsPerSecond} requests a second; retry in ${waitMs} ms.`, {
      requests_per_second: limits.requestsPerSecond,
      burst: limits.requestBurst,
      retry_after_ms: waitMs,
    });
  });
}
