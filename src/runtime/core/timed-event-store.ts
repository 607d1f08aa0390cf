/**
 * An EventStore decorator that measures append latency for `/metrics` and hosts the tests' crash points;
 * everything else passes through.
 */
import type { AppendOptions, EventData } from '../../store/event-store.ts';
import { ForwardingEventStore } from '../../store/forwarding-event-store.ts';
import { crashAfterAppend } from './crash-point.ts';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class TimedEventStore extends ForwardingEventStore {
  readonly appendLatency = { buckets: BUCKETS, counts: BUCKETS.map(() => 0), sum: 0, count: 0 };

  override async append(stream: string, events: EventData[], options: AppendOptions) {
    const started = process.hrtime.bigint();
    try {
      const result = await this.inner.append(stream, events, options);
      crashAfterAppend(events.map((e) => e.type));
      return result;
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const h = this.appendLatency;
      const i = BUCKETS.findIndex((le) => seconds <= le);
      if (i >= 0) h.counts[i]++;
      h.sum += seconds;
      h.count++;
    }
  }
}
