/** The per-token bucket of src/gateway/request-rate.ts, on a clock the test moves, and the knobs' parsing. */
import { describe, expect, it } from 'vitest';
import { gatewayLimitsFromEnv } from '../../../src/gateway/limits.ts';
import { RequestRate } from '../../../src/gateway/request-rate.ts';

describe('the request rate of a token', () => {
  it('admits a burst at once, then one request per 1/rate, and names the wait to the next', () => {
    const rate = new RequestRate(10, 3);
    expect([rate.take('a', 0), rate.take('a', 0), rate.take('a', 0)]).toEqual([0, 0, 0]);
    expect(rate.take('a', 0)).toBe(100); // empty: the next one in 1/10 s
    expect(rate.take('a', 40)).toBe(60); // a refusal takes nothing from the bucket
    expect(rate.take('a', 100)).toBe(0);
    expect(rate.take('a', 100)).toBe(100);
    expect(rate.take('b', 100)).toBe(0); // another token has its own bucket
  });

  it('refills no further than the burst, however long the token was quiet', () => {
    const rate = new RequestRate(1000, 2);
    rate.take('a', 0);
    const after = [1, 2, 3].map(() => rate.take('a', 1e9));
    expect(after).toEqual([0, 0, 1]);
  });

  it('reads BERTH_RATE_LIMIT (0 turns it off) and BERTH_RATE_BURST, and refuses what is not a count', () => {
    expect(gatewayLimitsFromEnv({ BERTH_RATE_LIMIT: '0', BERTH_RATE_BURST: '5' })).toEqual({ requestsPerSecond: 0, requestBurst: 5 });
    expect(() => gatewayLimitsFromEnv({ BERTH_RATE_LIMIT: '-1' })).toThrow(/BERTH_RATE_LIMIT: must be an integer >= 0/);
    expect(() => gatewayLimitsFromEnv({ BERTH_RATE_BURST: '0' })).toThrow(/BERTH_RATE_BURST: must be an integer >= 1/);
    expect(() => gatewayLimitsFromEnv({ BERTH_RATE_LIMIT: 'fast' })).toThrow(/BERTH_RATE_LIMIT/);
  });
});
