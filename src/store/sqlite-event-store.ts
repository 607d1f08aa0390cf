/**
 * The embedded event store (DESIGN §3): one SQLite file (better-sqlite3, WAL, synchronous=FULL) with EventStoreDB
 * semantics. Reads run on this thread; appends are committed by a writer thread (sqlite-writer.ts), all those issued
 * together or while the previous commit synced in one transaction (group commit). Several OS processes may share the
 * file.
 */
import Database from 'better-sqlite3';
import { BerthError } from '../../schemas/errors.ts';
import {
  type AppendOptions,
  type AppendResult,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type Subscription,
} from './event-store.ts';
import { AppendSignal } from './sqlite-append-signal.ts';
import { decodeRow, EVENT_COLUMNS, type EventRow } from './sqlite-event-row.ts';
import { SqliteSubscription } from './sqlite-subscription.ts';
import { SqliteWriter, type SerializedEvent } from './sqlite-writer.ts';

export interface SqliteEventStoreOptions {
  /** How long a writer waits for another process holding the write lock, in ms. */
  busyTimeoutMs?: number;
  /** How often live subscriptions look for events appended by other processes, in ms. */
  pollIntervalMs?: number;
  /** Events a subscription reads per page. */
  pageSize?: number;
}

interface PendingAppend {
  stream: string;
  events: SerializedEvent[];
  expected: ExpectedRevision;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

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

export class SqliteEventStore implements EventStore {
  readonly kind = 'sqlite' as const;
  /** Counters for tests and benchmarks: `commits` is the number of write transactions (one fsync each). */
  readonly stats = { commits: 0, appends: 0 };

  private readonly db: Database.Database;
  private readonly signal: AppendSignal;
  private readonly subscriptions = new Set<SqliteSubscription>();
  private readonly writer: SqliteWriter;
  private queue: PendingAppend[] = [];
  private flushScheduled = false;
  /** The commit under way in the writer thread, if any; appends queue behind it. */
  private committing: Promise<void> | undefined;
  private closed = false;
  private readonly pageSize: number;

  private readonly stmts: {
    revision: Database.Statement<[string], { revision: bigint | null }>;
    forwards: Database.Statement<[string, bigint, number], EventRow>;
    backwards: Database.Statement<[string, bigint, number], EventRow>;
    all: Database.Statement<[bigint, number], EventRow>;
    head: Database.Statement<[], { head: bigint | null }>;
  };

  private constructor(db: Database.Database, file: string, opts: SqliteEventStoreOptions) {
    this.db = db;
    this.writer = new SqliteWriter(file, opts.busyTimeoutMs ?? 10_000);
    this.pageSize = opts.pageSize ?? 256;
    this.stmts = {
      revision: db.prepare('SELECT MAX(revision) AS revision FROM events WHERE stream = ?'),
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
    };
    this.signal = new AppendSignal(() => this.readHead(), opts.pollIntervalMs ?? 50);
  }

  /** Opens (creating if needed) the store in `file`. Several processes may open the same file. */
  static open(file: string, opts: SqliteEventStoreOptions = {}): SqliteEventStore {
    const db = new Database(file);
    try {
      db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 10_000}`);
      db.pragma('journal_mode = WAL');
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

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    this.assertOpen();
    return this.readPage(options.fromPosition ?? 'start', options.maxCount ?? -1).map(decodeRow);
  }

  subscribeToAll(options: SubscribeOptions = {}): Subscription {
    this.assertOpen();
    const sub = new SqliteSubscription({
      fromPosition: options.fromPosition === undefined || options.fromPosition === 'start' ? 0n : options.fromPosition,
      filter: options.filter,
      pageSize: this.pageSize,
      readPage: (after, max) => this.readPage(after, max),
      signal: this.signal,
      onClose: () => this.subscriptions.delete(sub),
    });
    this.subscriptions.add(sub);
    return sub;
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
    this.closed = true;
    // Appends made before the close are committed (each commit sends what queued behind it).
    this.flush();
    while (this.committing) await this.committing;
    await this.writer.close();
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
  }

  private readPage(after: bigint | 'start', max: number): EventRow[] {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
    return this.stmts.all.all(after === 'start' ? 0n : after, max);
  }

  private readHead(): bigint {
    return this.stmts.head.get()?.head ?? -1n;
  }

  /** The stream's last revision, -1n when absent. */
  private currentRevision(stream: string): bigint {
    return this.stmts.revision.get(stream)?.revision ?? -1n;
  }

  /**
   * Sends every queued append to the writer as one transaction, unless a commit is under way: then they wait for it
   * and go together in the next.
   */
  private flush(): void {
    this.flushScheduled = false;
    if (this.committing || this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    const committed = this.writer.commit(batch.map(({ stream, events, expected }) => ({ stream, events, expected })));
    this.committing = committed
      .then(
        (outcomes) => {
          this.stats.commits++;
          this.stats.appends += batch.length;
          batch.forEach((p, i) => {
            const o = outcomes[i];
            if (o.ok) p.resolve(o.result);
            else p.reject(o.error);
          });
          if (outcomes.some((o) => o.ok && o.wrote)) this.signal.notify();
        },
        (e: Error) => {
          const error = new BerthError('unavailable', `the event store could not commit: ${e.message}`, {}, { cause: e });
          for (const p of batch) p.reject(error);
        },
      )
      .finally(() => {
        this.committing = undefined;
        this.flush();
      });
  }
}
