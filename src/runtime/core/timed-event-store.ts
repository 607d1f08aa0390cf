/**
 * An EventStore decorator that measures append latency and the duration spans (duration-spans.ts) for `/metrics`,
 * and hosts the tests' crash points; everything else passes through.
 */
import type { Histogram } from 'prom-client';
import type { AppendOptions, EventData, EventStore } from '../../store/event-store.ts';
import { ForwardingEventStore } from '../../store/forwarding-event-store.ts';
import { crashAfterAppend } from './crash-point.ts';
import { DurationSpans } from './duration-spans.ts';
import type { BerthMetrics } from './metrics-registry.ts';

export class TimedEventStore extends ForwardingEventStore {
  private readonly appendSeconds: Histogram;
  private readonly spans: DurationSpans;

  constructor(inner: EventStore, metrics: BerthMetrics) {
    super(inner);
    this.appendSeconds = metrics.histogram({ name: 'berth_event_store_append_seconds', help: 'Event store append latency.' });
    this.spans = new DurationSpans(metrics);
  }

  override async append(stream: string, events: EventData[], options: AppendOptions) {
    const stop = this.appendSeconds.startTimer();
    try {
      const result = await this.inner.append(stream, events, options);
      this.spans.appended(stream, events);
      crashAfterAppend(events.map((e) => e.type));
      return result;
    } finally {
      stop();
    }
  }
}
