/** A base for EventStore decorators (timing, counting): every call goes to the wrapped store unless overridden. */
import type {
  AppendOptions,
  CompactOptions,
  EventData,
  EventStore,
  ReadAllOptions,
  ReadStreamOptions,
  StreamFrom,
  SubscribeOptions,
} from './event-store.ts';

export class ForwardingEventStore implements EventStore {
  /** Offered only where the wrapped store has it, so callers still fall back to `readStream` where it does not. */
  readStreams?: (streams: readonly StreamFrom[]) => ReturnType<NonNullable<EventStore['readStreams']>>;
  /** Likewise: without it, callers read. */
  revisionNow?: (stream: string) => bigint;

  constructor(readonly inner: EventStore) {
    if (inner.readStreams) this.readStreams = (streams) => inner.readStreams!(streams);
    if (inner.revisionNow) this.revisionNow = (stream) => inner.revisionNow!(stream);
  }

  get kind(): EventStore['kind'] {
    return this.inner.kind;
  }
  append(stream: string, events: EventData[], options: AppendOptions) {
    return this.inner.append(stream, events, options);
  }
  compactStream(stream: string, summary: EventData, options: CompactOptions) {
    return this.inner.compactStream(stream, summary, options);
  }
  readStream(stream: string, options?: ReadStreamOptions) {
    return this.inner.readStream(stream, options);
  }
  readAll(options?: ReadAllOptions) {
    return this.inner.readAll(options);
  }
  subscribeToAll(options?: SubscribeOptions) {
    return this.inner.subscribeToAll(options);
  }
  streamRevision(stream: string) {
    return this.inner.streamRevision(stream);
  }
  headPosition() {
    return this.inner.headPosition();
  }
  close() {
    return this.inner.close();
  }
}
