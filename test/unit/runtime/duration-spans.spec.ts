/**
 * DurationSpans measures between the events that open and close each span, as they are appended: an allocation
 * still pending keeps its span open, one refused is not measured, checkpoint attempts of one view are told apart,
 * a close without an open (a restart in between) observes nothing, and warm claims land on the same family.
 */
import { describe, expect, it } from 'vitest';
import { DurationSpans, observeWarmClaim } from '../../../src/runtime/core/duration-spans.ts';
import { BerthMetrics } from '../../../src/runtime/core/metrics-registry.ts';
import type { EventData } from '../../../src/store/event-store.ts';

const event = (type: string, data: unknown = {}): EventData => ({ id: crypto.randomUUID(), type, data });

async function counts(metrics: BerthMetrics): Promise<Record<string, number>> {
  const found: Record<string, number> = {};
  for (const line of (await metrics.text()).split('\n')) {
    const m = /^(berth_\w+)_count(\{[^}]*\})? (\d+)$/.exec(line);
    if (m) found[`${m[1]}${m[2] ?? ''}`] = Number(m[3]);
  }
  return found;
}

describe('DurationSpans', () => {
  it('should keep an allocation span open through pending and observe it cold once ready; a refused one is not measured', async () => {
    const metrics = new BerthMetrics();
    const spans = new DurationSpans(metrics);
    spans.appended('allocation-a', [event('allocation.intended')]);
    spans.appended('allocation-b', [event('allocation.intended')]);
    spans.appended('allocation-a', [event('allocation.reported', { report: { status: 'pending' } })]);
    expect((await counts(metrics))['berth_allocate_seconds{start="cold"}']).toBe(0);
    await new Promise((r) => setTimeout(r, 20));
    spans.appended('allocation-a', [event('allocation.reported', { report: { status: 'ready' } })]);
    spans.appended('allocation-b', [event('allocation.reported', { report: { status: 'absent' } })]);
    // b's span was dropped: a later ready report of b is not a measurement.
    spans.appended('allocation-b', [event('allocation.reported', { report: { status: 'ready' } })]);
    const text = await metrics.text();
    expect((await counts(metrics))['berth_allocate_seconds{start="cold"}']).toBe(1);
    const sum = Number(/^berth_allocate_seconds_sum\{start="cold"\} (\S+)$/m.exec(text)![1]);
    expect(sum).toBeGreaterThanOrEqual(0.015);
    observeWarmClaim(metrics, 0.004);
    expect((await counts(metrics))['berth_allocate_seconds{start="warm"}']).toBe(1);
  });

  it('should tell checkpoint attempts of one view apart, label each by its result, and ignore a close it never saw open', async () => {
    const metrics = new BerthMetrics();
    const spans = new DurationSpans(metrics);
    spans.appended('mount-w', [event('mount.checkpoint_started', { attemptId: 'one' }), event('mount.checkpoint_started', { attemptId: 'two' })]);
    spans.appended('mount-w', [event('mount.checkpoint_stale', { attemptId: 'two' })]);
    spans.appended('mount-w', [event('mount.checkpoint_published', { attemptId: 'one' })]);
    spans.appended('mount-w', [event('mount.checkpoint_published', { attemptId: 'three' })]);
    spans.appended('execution-x', [event('execution.started')]);
    spans.appended('execution-y', [event('execution.accepted')]);
    spans.appended('execution-y', [event('execution.started'), event('execution.exited')]);
    spans.appended('build-z', [event('build.requested')]);
    spans.appended('build-z', [event('build.failed')]);
    expect(await counts(metrics)).toMatchObject({
      'berth_checkpoint_seconds{view="mount",result="published"}': 1,
      'berth_checkpoint_seconds{view="mount",result="stale"}': 1,
      berth_command_start_seconds: 1,
      'berth_build_seconds{result="failed"}': 1,
    });
  });
});
