/**
 * BerthMetrics refuses a family off the naming conventions when it is made (so no scrape ever shows one), and a
 * registry is the Berth's own: two Berths in one process count apart, and the process's metrics appear in both.
 */
import { describe, expect, it } from 'vitest';
import { BerthMetrics } from '../../../src/runtime/core/metrics-registry.ts';

describe('BerthMetrics', () => {
  it('should refuse a counter without _total, a histogram not in seconds or bytes, a gauge ending _total and a name without berth_', () => {
    const m = new BerthMetrics();
    expect(() => m.counter({ name: 'berth_claims', help: 'x' })).toThrow(/_total/);
    expect(() => m.histogram({ name: 'berth_claim_ms', help: 'x' })).toThrow(/seconds or bytes/);
    expect(() => m.gauge({ name: 'berth_ready_total', help: 'x' })).toThrow(/_total/);
    expect(() => m.counter({ name: 'claims_total', help: 'x' })).toThrow(/berth_/);
    expect(() => m.counter({ name: 'berth_Claims_total', help: 'x' })).toThrow(/snake case/);
    m.counter({ name: 'berth_claims_total', help: 'Claims.' });
    expect(() => m.counter({ name: 'berth_claims_total', help: 'Again.' })).toThrow(/already been registered/);
  });

  it('should keep two Berths\' counts apart and show the process metrics in each', async () => {
    const a = new BerthMetrics();
    const b = new BerthMetrics();
    a.counter({ name: 'berth_claims_total', help: 'Claims.' }).inc(3);
    b.counter({ name: 'berth_claims_total', help: 'Claims.' }).inc();
    expect(await a.text()).toMatch(/^berth_claims_total 3$/m);
    expect(await b.text()).toMatch(/^berth_claims_total 1$/m);
    for (const m of [a, b]) expect(await m.text()).toMatch(/^process_cpu_seconds_total \d/m);
    expect(a.family('berth_claims_total')).toBeDefined();
    expect(() => a.family('berth_nothing_total')).toThrow(/no metric family/);
  });
});
