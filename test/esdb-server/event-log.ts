/**
 * The test server's storage: one in-memory transaction log with streams, positions and the append consistency checks
 * ported from KurrentDB (src/KurrentDB.Core/Services/Storage/ReaderIndex/IndexWriter.cs, CheckCommit), so that what
 * Berth relies on (expected revisions, idempotent retries, positions) behaves as a real node's does.
 */
export type Expected = bigint | 'any' | 'no_stream' | 'stream_exists';

export interface ProposedEvent {
  /** Lowercase: the server parses ids as Guids, so their case never matters (Guid.ToString() is lowercase). */
  id: string;
  type: string;
  contentType: string;
  data: Uint8Array;
  metadata: Uint8Array;
}

export interface StoredEvent extends ProposedEvent {
  stream: string;
  revision: bigint;
  /** Commit = prepare position: each event is its own committed prepare in the log (AllReader.cs,
   * `new CommitEventRecord(eventRecord, prepare.LogPosition)`). */
  position: bigint;
  /** 100 ns ticks since the Unix epoch, as the `created` metadata carries them (DateTime.ToTicksSinceEpoch). */
  created: bigint;
}

export type AppendOutcome =
  | { kind: 'written' | 'idempotent'; nextRevision: bigint; position: bigint }
  | { kind: 'wrong_expected_version'; actual: bigint | 'no_stream' };

/** truncateBefore of a soft-deleted stream (EventNumber.DeletedStream = long.MaxValue). */
export const DELETED = 2n ** 63n - 1n;
/** Every record in a real transaction file also carries a header: positions grow by at least this much per event. */
const RECORD_HEADER = 80n;
/** Most event ids the weak idempotency check (any, stream_exists) remembers: KurrentDB's `_committedEvents` is a
 * BoundedCache limited by ESConsts.CommittedEventsMemCacheLimit; this one is small so tests can outrun it. */
export const COMMITTED_EVENTS_CACHE = 1_000;

export class EventLog {
  private readonly all: StoredEvent[] = [];
  private readonly streams = new Map<string, StoredEvent[]>();
  /** Event id → where it was written, oldest first; trimmed to COMMITTED_EVENTS_CACHE. */
  private readonly committed = new Map<string, { stream: string; revision: bigint }>();
  private nextPosition: bigint;
  private readonly listeners = new Set<() => void>();
  private readonly statsEvery: number;
  private writes = 0;

  /**
   * A fresh database starts at a non-zero position (after its chunk header and epoch records) with the node's own
   * `$settings`; after every `statsEvery` writes the node records `$statsCollected` in `$stats-<endpoint>`, as
   * src/KurrentDB.Core/Services/Monitoring/MonitoringService.cs does on a timer, so system events sit between Berth's.
   */
  constructor(options: { firstPosition?: bigint; statsEvery?: number } = {}) {
    this.nextPosition = options.firstPosition ?? 4_096n;
    this.statsEvery = options.statsEvery ?? 5;
    this.writeSystemEvent('$settings', '$settings', { $userStreamAcl: { $r: '$all', $w: '$all' } });
  }

  get headPosition(): bigint {
    return this.all.at(-1)?.position ?? -1n;
  }

  /** Wakes live subscriptions after every write. */
  onWrite(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  append(stream: string, expected: Expected, events: ProposedEvent[]): AppendOutcome {
    const decision = this.checkCommit(stream, expected, events);
    if (decision.kind !== 'ok') return decision;
    const existing = this.streams.get(stream) ?? [];
    let revision = this.lastRevision(stream) ?? -1n;
    const created = BigInt(Date.now()) * 10_000n;
    let position = -1n;
    for (const e of events) {
      revision += 1n;
      position = this.nextPosition;
      this.nextPosition += RECORD_HEADER + BigInt(stream.length + e.type.length + e.data.length + e.metadata.length);
      const stored: StoredEvent = { ...e, stream, revision, position, created };
      existing.push(stored);
      this.all.push(stored);
      this.remember(e.id, stream, revision);
    }
    this.streams.set(stream, existing);
    // A write to a soft-deleted stream brings it back from its new first event (KurrentDB rewrites its metadata).
    if (events.length > 0 && this.truncateBefore(stream) === DELETED) {
      this.writeMetadata(stream, { $tb: Number(revision) - events.length + 1 });
    }
    if (!stream.startsWith('$') && ++this.writes % this.statsEvery === 0) {
      this.writeSystemEvent('$stats-127.0.0.1:2113', '$statsCollected', { 'proc-id': process.pid, writes: this.writes });
    }
    for (const listener of [...this.listeners]) listener();
    // The append answers with its last event's position: the storage chaser acknowledges the prepare flagged
    // TransactionEnd (StorageChaser.cs) and WriteEvents.cs reports that CommitPosition as commit and prepare.
    return { kind: 'written', nextRevision: revision, position };
  }

  /** A stream's readable events (truncateBefore applied), or undefined when it does not exist or is soft-deleted. */
  streamEvents(stream: string): StoredEvent[] | undefined {
    const events = this.streams.get(stream);
    const truncateBefore = this.truncateBefore(stream);
    if (!events || events.length === 0 || truncateBefore === DELETED) return undefined;
    return truncateBefore === undefined ? events : events.filter((e) => e.revision >= truncateBefore);
  }

  /** Events of $all with `from` ≤ position (forwards, inclusive) or position < `from` (backwards, exclusive: the
   * backward read starts with TryReadPrev, the record that ends at or before `from`), as
   * src/KurrentDB.Core/Services/Storage/ReaderIndex/AllReader.cs reads them. `upTo` hides what a follower lacks. */
  readAll(from: bigint | 'start' | 'end', direction: 'forwards' | 'backwards', count: number, upTo = this.headPosition): StoredEvent[] {
    const visible = (e: StoredEvent) => e.position <= upTo;
    if (direction === 'forwards') {
      const start = from === 'start' ? 0 : from === 'end' ? this.all.length : this.indexAtOrAfter(from);
      const out: StoredEvent[] = [];
      for (let i = start; i < this.all.length && out.length < count && visible(this.all[i]); i++) out.push(this.all[i]);
      return out;
    }
    let i = from === 'end' ? this.all.length - 1 : from === 'start' ? -1 : this.indexAtOrAfter(from) - 1;
    const out: StoredEvent[] = [];
    for (; i >= 0 && out.length < count; i--) if (visible(this.all[i])) out.push(this.all[i]);
    return out;
  }

  /** The first index whose event is at `position` or after (binary search: positions increase). */
  indexAtOrAfter(position: bigint): number {
    let lo = 0;
    let hi = this.all.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.all[mid].position < position) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  eventAt(index: number): StoredEvent | undefined {
    return this.all[index];
  }

  /** Soft delete (Streams.Delete.cs, then StorageWriterService.cs): the stream's metadata gets truncateBefore =
   * EventNumber.DeletedStream; its events stay in $all until a scavenge. */
  softDelete(stream: string): bigint {
    return this.writeMetadata(stream, { $tb: Number(DELETED) });
  }

  lastRevision(stream: string): bigint | undefined {
    return this.streams.get(stream)?.at(-1)?.revision;
  }

  private truncateBefore(stream: string): bigint | undefined {
    const meta = this.streams.get(`$$${stream}`)?.at(-1);
    if (!meta) return undefined;
    const tb = (JSON.parse(Buffer.from(meta.data).toString('utf8')) as { $tb?: number }).$tb;
    if (tb === undefined) return undefined;
    return tb >= Number(DELETED) ? DELETED : BigInt(tb);
  }

  private writeMetadata(stream: string, metadata: object): bigint {
    return this.writeSystemEvent(`$$${stream}`, '$metadata', metadata);
  }

  private writeSystemEvent(stream: string, type: string, data: object): bigint {
    const event = {
      id: crypto.randomUUID(),
      type,
      contentType: 'application/json',
      data: Buffer.from(JSON.stringify(data)),
      metadata: new Uint8Array(),
    };
    const outcome = this.append(stream, 'any', [event]);
    return outcome.kind === 'wrong_expected_version' ? -1n : outcome.position;
  }

  private remember(id: string, stream: string, revision: bigint): void {
    this.committed.set(id, { stream, revision });
    if (this.committed.size > COMMITTED_EVENTS_CACHE) this.committed.delete(this.committed.keys().next().value!);
  }

  /** IndexWriter.CheckCommit: ok, idempotent (the same ids already there), or a consistency check failure. */
  private checkCommit(stream: string, expected: Expected, events: ProposedEvent[]): { kind: 'ok' } | AppendOutcome {
    const current = this.lastRevision(stream);
    const wrong = { kind: 'wrong_expected_version', actual: current ?? 'no_stream' } as const;
    if (current === undefined) {
      // CheckCommitForNewStream: only any and no_stream create a stream (stream_exists holds for a stream with
      // metadata only, which Berth never writes).
      return expected === 'any' || expected === 'no_stream' ? { kind: 'ok' } : wrong;
    }
    if (expected === 'stream_exists' && this.truncateBefore(stream) === DELETED) return wrong;
    if (expected === 'any' || expected === 'stream_exists') {
      // Weak idempotency: only recently written ids are looked up, in the bounded cache, wherever they are.
      let end: bigint | undefined;
      for (const [i, e] of events.entries()) {
        const seen = this.committed.get(e.id);
        if (seen && seen.stream === stream) {
          end = seen.revision;
          continue;
        }
        if (i > 0) return wrong; // CorruptedIdempotency, answered as a consistency check failure
        return { kind: 'ok' };
      }
      if (end === undefined) return { kind: 'ok' };
      return this.idempotent(stream, end);
    }
    const expectedRevision = expected === 'no_stream' ? -1n : expected;
    if (expectedRevision < current) {
      // Strong idempotency: the ids must be exactly at the revisions after the expected one.
      let revision = expectedRevision;
      for (const [i, e] of events.entries()) {
        revision += 1n;
        if (this.streams.get(stream)?.[Number(revision)]?.id === e.id) continue;
        if (i === 0 && expected === 'no_stream' && this.truncateBefore(stream) === DELETED) return { kind: 'ok' };
        return wrong;
      }
      if (events.length === 0) return wrong;
      return this.idempotent(stream, revision);
    }
    return expectedRevision > current ? wrong : { kind: 'ok' };
  }

  private idempotent(stream: string, revision: bigint): AppendOutcome {
    const event = this.streams.get(stream)![Number(revision)];
    return { kind: 'idempotent', nextRevision: revision, position: event.position };
  }
}
