/**
 * The embedded event store (DESIGN §3): one SQLite file (better-sqlite3, WAL, synchronous=FULL) with EventStoreDB
 * semantics. Appends issued together are group-committed in one transaction; several OS processes may share the file.
 */
import Database from 'better-sqlite3';
import { untilNotBusy } from './sqlite-busy.ts';
import { BerthError } from '../../schemas/errors.ts';
import {
  WrongExpectedVersion,
  type AppendOptions,
  type AppendResult,
  type CompactOptions,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamEvent,
  type StreamFrom,
  type SubscribeOptions,
  type Subscription,
} from './event-store.ts';
import { AppendSignal } from './sqlite-append-signal.ts';
import { SqliteCheckpointer } from './sqlite-checkpointer.ts';
import { assertStoreFileKind, assertStoreSchema, keepStorePrivate } from './sqlite-store-file.ts';
import { decodeRow, decodeStreamRow, EVENT_COLUMNS, STREAM_EVENT_COLUMNS, type EventRow, type StreamRow } from './sqlite-event-row.ts';
import { SqliteSubscription } from './sqlite-subscription.ts';

export interface SqliteEventStoreOptions {
  /** How long a writer waits for another process holding the write lock, in ms. */
  busyTimeoutMs?: number;
  /** How often live subscriptions look for events appended by other processes, in ms. */
  pollIntervalMs?: number;
  /** Events a subscription reads per page. */
  pageSize?: number;
  /**
   * Payload bytes (data and metadata, as stored) past which a subscription's page ends early: a page holds at least
   * one event, and stops at the event that reaches this. Default 1 MiB.
   */
  pageBytes?: number;
}

interface SerializedEvent {
  id: string;
  type: string;
  data: string;
  metadata: string;
}

interface AppendRequest {
  stream: string;
  events: SerializedEvent[];
  expected: ExpectedRevision;
}

interface PendingAppend extends AppendRequest {
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

type Outcome = { ok: true; result: AppendResult; wrote: boolean } | { ok: false; error: unknown };

const schema = `
  CREATE TABLE IF NOT EXISTS events (
    position   INTEGER PRIMARY KEY AUTOINCREMENT,
    stream     TEXT    NOT NULL,
    revision   INTEGER NOT NULL,
    id         TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    metadata   TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    UNIQUE (stream, revision),
    -- As in EventStoreDB, an id is unique within its stream (idempotence is per stream); other streams may reuse it.
    UNIQUE (stream, id)
  );
`;

function serialize(stream: string, events: EventData[]): SerializedEvent[] {
  const ids = new Set<string>();
  return events.map((e) => {
    if (typeof e.id !== 'string' || e.id === '' || typeof e.type !== 'string' || e.type === '') {
      throw new BerthError('invalid_request', `an event appended to ${stream} has no id or type`, { stream });
    }
    if (ids.has(e.id)) {
      throw new BerthError('invalid_request', `event id ${e.id} appears twice in one append to ${stream}`, { stream });
    }
    ids.add(e.id);
    try {
      return { id: e.id, type: e.type, data: JSON.stringify(e.data ?? null), metadata: JSON.stringify(e.metadata ?? {}) };
    } catch (cause) {
      throw new BerthError('invalid_request', `event ${e.id} for ${stream} is not JSON-serialisable`, { stream }, { cause });
    }
  });
}

/** Streams per `readStreams` statement (two parameters each, far under SQLite's limit). */
const READ_STREAMS_CHUNK = 256;

const isUniqueViolation = (e: unknown): boolean =>
  e instanceof Database.SqliteError && e.code.startsWith('SQLITE_CONSTRAINT');

/** An append refused after some of its rows were inserted: the transaction around it must roll them back. */
class PartlyWritten extends Error {
  constructor(readonly refusal: unknown) {
    super('an append was refused after some of its events were inserted');
  }
}

export class SqliteEventStore implements EventStore {
  readonly kind = 'sqlite' as const;
  /** Counters for tests and benchmarks: `commits` is the number of write transactions (one fsync each). */
  readonly stats = { commits: 0, appends: 0 };

  private readonly db: Database.Database;
  private readonly signal: AppendSignal;
  private readonly checkpointer: SqliteCheckpointer;
  private readonly subscriptions = new Set<SqliteSubscription>();
  private queue: PendingAppend[] = [];
  private flushScheduled = false;
  private closed = false;
  private readonly pageSize: number;
  private readonly pageBytes: number;
  /** `readStreams` statements by how many streams they name (a full chunk, and the remainders met so far). */
  private readonly manyStreams = new Map<number, Database.Statement<(string | bigint)[], StreamRow>>();

  private readonly stmts: {
    revision: Database.Statement<[string], { revision: bigint | null }>;
    byId: Database.Statement<[string, string], { revision: bigint }>;
    idsFrom: Database.Statement<[string, bigint, number], { id: string; revision: bigint; position: bigint }>;
    insert: Database.Statement<[string, bigint, string, string, string, string, string]>;
    lastOfStream: Database.Statement<[string], { revision: bigint; position: bigint }>;
    forwards: Database.Statement<[string, bigint, number], EventRow>;
    backwards: Database.Statement<[string, bigint, number], EventRow>;
    all: Database.Statement<[bigint, number], EventRow>;
    head: Database.Statement<[], { head: bigint | null }>;
    dropBefore: Database.Statement<[string, bigint]>;
    dropStream: Database.Statement<[string]>;
  };

  private readonly commitBatch: Database.Transaction<(batch: PendingAppend[]) => Outcome[]>;
  private readonly commitIsolated: Database.Transaction<(batch: PendingAppend[]) => Outcome[]>;
  private readonly commitCompaction: Database.Transaction<(p: AppendRequest, dropStreams: string[]) => Outcome>;

  private constructor(db: Database.Database, file: string, opts: SqliteEventStoreOptions) {
    this.db = db;
    this.checkpointer = new SqliteCheckpointer(file, () => db.pragma('wal_checkpoint(PASSIVE)'));
    this.pageSize = opts.pageSize ?? 256;
    this.pageBytes = opts.pageBytes ?? 1024 * 1024;
    this.stmts = {
      revision: db.prepare('SELECT MAX(revision) AS revision FROM events WHERE stream = ?'),
      byId: db.prepare('SELECT revision FROM events WHERE stream = ? AND id = ?'),
      idsFrom: db.prepare(
        'SELECT id, revision, position FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
      ),
      insert: db.prepare(
        'INSERT INTO events (stream, revision, id, type, data, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      lastOfStream: db.prepare(
        'SELECT revision, position FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1',
      ),
      forwards: db
        .prepare<[string, bigint, number], EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE stream = ? AND revision >= ? ORDER BY revision ASC LIMIT ?`)
        .raw(true),
      backwards: db
        .prepare<[string, bigint, number], EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE stream = ? AND revision <= ? ORDER BY revision DESC LIMIT ?`)
        .raw(true),
      all: db
        .prepare<[bigint, number], EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position ASC LIMIT ?`)
        .raw(true),
      head: db.prepare('SELECT MAX(position) AS head FROM events'),
      dropBefore: db.prepare('DELETE FROM events WHERE stream = ? AND revision < ?'),
      dropStream: db.prepare('DELETE FROM events WHERE stream = ?'),
    };
    this.signal = new AppendSignal(() => this.readHead(), opts.pollIntervalMs ?? 50);
    // An append refused before its first insert leaves nothing to undo, so the appends of a batch share the one
    // transaction without a savepoint each (a savepoint costs about as much as a third of the insert). One refused
    // after an insert (an id already further down its stream) aborts the batch, which then runs again with each
    // append in its own savepoint (a nested better-sqlite3 transaction), so it alone is rolled back.
    this.commitBatch = db.transaction((batch: PendingAppend[]): Outcome[] =>
      batch.map((p) => {
        try {
          return this.appendOne(p);
        } catch (error) {
          if (error instanceof PartlyWritten) throw error;
          return { ok: false, error };
        }
      }),
    );
    this.commitCompaction = this.compactionTransaction();
    const isolated = db.transaction((p: PendingAppend) => this.appendOne(p));
    this.commitIsolated = db.transaction((batch: PendingAppend[]): Outcome[] =>
      batch.map((p) => {
        try {
          return isolated(p);
        } catch (error) {
          return { ok: false, error: error instanceof PartlyWritten ? error.refusal : error };
        }
      }),
    );
  }

  /** Removing the rows before the summary in the summary's own transaction: a crash leaves both or neither. */
  private compactionTransaction() {
    return this.db.transaction((p: AppendRequest, dropStreams: string[]): Outcome => {
      const outcome = this.appendOne(p);
      if (outcome.ok) {
        this.stmts.dropBefore.run(p.stream, outcome.result.nextRevision);
        for (const s of dropStreams) this.stmts.dropStream.run(s);
      }
      return outcome;
    });
  }

  /**
   * Opens (creating if needed) the store in `file`. Several processes may open the same file. A file that is not a
   * store (sqlite-store-file.ts) is refused before anything is written to it.
   */
  static open(file: string, opts: SqliteEventStoreOptions = {}): SqliteEventStore {
    assertStoreFileKind(file);
    const db = new Database(file);
    try {
      db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 10_000}`);
      assertStoreSchema(db, file);
      keepStorePrivate(file);
      untilNotBusy(() => db.pragma('journal_mode = WAL'), opts.busyTimeoutMs ?? 10_000);
      // FULL: an acknowledged append survives power loss (WAL + NORMAL would only survive a process crash).
      db.pragma('synchronous = FULL');
      // The log is checkpointed by a worker thread (sqlite-checkpointer.ts), not by the commit that crosses 1000 pages.
      db.pragma('wal_autocheckpoint = 0');
      db.defaultSafeIntegers(true);
      db.exec(schema);
      return new SqliteEventStore(db, file, opts);
    } catch (e) {
      db.close();
      throw e;
    }
  }

  append(stream: string, events: EventData[], options: AppendOptions): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new BerthError('unavailable', 'the event store is closed'));
    let serialized: SerializedEvent[];
    try {
      serialized = serialize(stream, events);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ stream, events: serialized, expected: options.expectedRevision, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // Everything appended before the event loop's next check phase shares one transaction (group commit).
        setImmediate(() => this.flush());
      }
    });
  }

  /** One IMMEDIATE transaction of its own, beside the group commit (compactions are rare maintenance). */
  async compactStream(stream: string, summary: EventData, options: CompactOptions): Promise<AppendResult> {
    this.assertOpen();
    const append = { stream, events: serialize(stream, [summary]), expected: options.expectedRevision };
    const outcome = this.commitCompaction.immediate(append, options.dropStreams ?? []);
    this.stats.commits++;
    if (!outcome.ok) throw outcome.error;
    if (outcome.wrote) {
      this.checkpointer.committed();
      this.signal.notify();
    }
    return outcome.result;
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    this.assertOpen();
    const direction = options.direction ?? 'forwards';
    const limit = options.maxCount ?? -1;
    const from = options.from ?? (direction === 'forwards' ? 'start' : 'end');
    let rows: EventRow[];
    if (direction === 'forwards') {
      const start = from === 'start' ? 0n : from === 'end' ? this.currentRevision(stream) + 1n : from;
      rows = this.stmts.forwards.all(stream, start, limit);
    } else {
      const start = from === 'end' ? this.currentRevision(stream) : from === 'start' ? 0n : from;
      rows = this.stmts.backwards.all(stream, start, limit);
    }
    if (rows.length === 0 && this.currentRevision(stream) < 0n) {
      throw new BerthError('not_found', `stream ${stream} does not exist`, { stream });
    }
    return rows.map(decodeRow);
  }

  async readStreams(streams: readonly StreamFrom[]): Promise<Map<string, StreamEvent[]>> {
    this.assertOpen();
    const found = new Map<string, StreamEvent[]>();
    // SQLite reads each stream along its (stream, revision) key, in revision order; an ORDER BY would sort every
    // row in a temporary tree instead, so a stream that came back otherwise (another plan) is sorted here.
    const unordered = new Set<string>();
    for (let i = 0; i < streams.length; i += READ_STREAMS_CHUNK) {
      const chunk = streams.slice(i, i + READ_STREAMS_CHUNK);
      const params = chunk.flatMap((s) => [s.stream, s.from]);
      for (const row of this.manyStreamsStatement(chunk.length).all(...params)) {
        const event = decodeStreamRow(row);
        const events = found.get(event.stream);
        if (!events) found.set(event.stream, [event]);
        else if (events[events.length - 1].revision < event.revision) events.push(event);
        else {
          events.push(event);
          unordered.add(event.stream);
        }
      }
    }
    for (const stream of unordered) found.get(stream)!.sort((a, b) => (a.revision < b.revision ? -1 : 1));
    return found;
  }

  private manyStreamsStatement(count: number) {
    let statement = this.manyStreams.get(count);
    if (!statement) {
      const wanted = Array.from({ length: count }, () => '(?, ?)').join(', ');
      statement = this.db
        .prepare<(string | bigint)[], StreamRow>(
          `WITH wanted(s, r) AS (VALUES ${wanted}) SELECT ${STREAM_EVENT_COLUMNS} FROM wanted JOIN events ON stream = s AND revision >= r`,
        )
        .raw(true);
      this.manyStreams.set(count, statement);
    }
    return statement;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.readPage(options.fromPosition ?? 'start', options.maxCount ?? -1).map(decodeRow);
  }

  subscribeToAll(options: SubscribeOptions = {}): Subscription {
    this.assertOpen();
    const sub = new SqliteSubscription({
      fromPosition: options.fromPosition === undefined || options.fromPosition === 'start' ? 0n : options.fromPosition,
      filter: options.filter,
      ...(options.pace ? { pace: options.pace } : {}),
      ...(options.until !== undefined ? { until: options.until } : {}),
      pageSize: this.pageSize,
      readPage: (after, max) => this.readBoundedPage(after, max),
      signal: this.signal,
      onClose: () => this.subscriptions.delete(sub),
    });
    this.subscriptions.add(sub);
    return sub;
  }

  revisionNow(stream: string): bigint {
    this.assertOpen();
    return this.currentRevision(stream);
  }

  async streamRevision(stream: string): Promise<bigint | 'no_stream'> {
    this.assertOpen();
    const revision = this.currentRevision(stream);
    return revision < 0n ? 'no_stream' : revision;
  }

  async headPosition(): Promise<bigint> {
    this.assertOpen();
    return this.readHead();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.queue.length > 0) this.flush();
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    await this.checkpointer.close();
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
  }

  private readPage(after: bigint | 'start', max: number): EventRow[] {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
    return this.stmts.all.all(after === 'start' ? 0n : after, max);
  }

  /**
   * A subscription's page: at most `max` rows, and no more once their payloads reach `pageBytes`. A subscription holds
   * its page until its consumer has taken every event of it, and a consumer may be a client that stopped reading
   * (an audit feed): 256 events of a member's 1 MiB commands were 256 MiB per feed, 32 feeds per token.
   */
  private readBoundedPage(after: bigint, max: number): EventRow[] {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
    const rows: EventRow[] = [];
    let bytes = 0;
    for (const row of this.stmts.all.iterate(after, max)) {
      rows.push(row);
      bytes += row[5].length + row[6].length;
      if (bytes >= this.pageBytes) break;
    }
    return rows;
  }

  private readHead(): bigint {
    return this.stmts.head.get()?.head ?? -1n;
  }

  /** The stream's last revision, -1n when absent. */
  private currentRevision(stream: string): bigint {
    return this.stmts.revision.get(stream)?.revision ?? -1n;
  }

  /** Commits every queued append in one IMMEDIATE transaction (see commitBatch for when each gets a savepoint). */
  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    let outcomes: Outcome[];
    try {
      try {
        outcomes = this.commitBatch.immediate(batch);
      } catch (e) {
        if (!(e instanceof PartlyWritten)) throw e;
        outcomes = this.commitIsolated.immediate(batch);
      }
      this.stats.commits++;
    } catch (e) {
      const error = new BerthError('unavailable', `the event store could not commit: ${(e as Error).message}`, {}, {
        cause: e,
      });
      for (const p of batch) p.reject(error);
      return;
    }
    this.stats.appends += batch.length;
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if (o.ok) p.resolve(o.result);
      else p.reject(o.error);
    });
    if (outcomes.some((o) => o.ok && o.wrote)) {
      this.checkpointer.committed();
      this.signal.notify();
    }
  }

  /** EventStoreDB's rules: check the expected revision, recognise a retried append by its ids, else insert. */
  private appendOne(p: AppendRequest): Outcome {
    const current = this.currentRevision(p.stream);
    const actual = current < 0n ? ('no_stream' as const) : current;
    const wrong = () => new WrongExpectedVersion(p.stream, p.expected, actual);
    if (p.events.length === 0) {
      if (!this.expectationHolds(p.expected, current)) throw wrong();
      const last = this.stmts.lastOfStream.get(p.stream);
      return { ok: true, result: { nextRevision: current, position: last?.position ?? -1n }, wrote: false };
    }

    if (typeof p.expected === 'bigint' || p.expected === 'no_stream') {
      const expected = p.expected === 'no_stream' ? -1n : p.expected;
      if (current > expected) {
        // Already past the expected revision: a retry of an append that succeeded, or a real conflict.
        const original = this.existingBatchAt(p.stream, expected + 1n, p.events);
        if (original) return { ok: true, result: original, wrote: false };
        throw wrong();
      }
      if (current < expected) throw wrong();
    } else {
      const first = this.stmts.byId.get(p.stream, p.events[0].id);
      if (first) {
        const original = this.existingBatchAt(p.stream, first.revision, p.events);
        if (original) return { ok: true, result: original, wrote: false };
        throw wrong();
      }
      if (p.expected === 'stream_exists' && current < 0n) throw wrong();
    }

    const createdAt = new Date().toISOString();
    let position = -1n;
    let revision = current;
    try {
      for (const e of p.events) {
        revision++;
        const info = this.stmts.insert.run(p.stream, revision, e.id, e.type, e.data, e.metadata, createdAt);
        position = BigInt(info.lastInsertRowid);
      }
    } catch (e) {
      // An id already in this stream at another position: a partly repeated batch, which EventStoreDB refuses too.
      const error = isUniqueViolation(e) ? wrong() : e;
      // A failed INSERT undoes itself; the rows this append inserted before it must be rolled back by the caller.
      throw revision > current + 1n ? new PartlyWritten(error) : error;
    }
    return { ok: true, result: { nextRevision: revision, position }, wrote: true };
  }

  private expectationHolds(expected: ExpectedRevision, current: bigint): boolean {
    if (expected === 'any') return true;
    if (expected === 'no_stream') return current < 0n;
    if (expected === 'stream_exists') return current >= 0n;
    return current === expected;
  }

  /** The original result when the stream holds exactly these ids from revision `from` on, else undefined. */
  private existingBatchAt(stream: string, from: bigint, events: SerializedEvent[]): AppendResult | undefined {
    const stored = this.stmts.idsFrom.all(stream, from, events.length);
    if (stored.length !== events.length || stored.some((s, i) => s.id !== events[i].id)) return undefined;
    const last = stored[stored.length - 1];
    return { nextRevision: last.revision, position: last.position };
  }
}
