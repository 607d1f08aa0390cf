/**
 * The worker thread of sqlite-writer.ts: commits the SQLite store's batches of appends on its own connection, with
 * EventStoreDB's append rules. Plain JavaScript (imports node: modules and better-sqlite3 only), so it loads alike
 * under node, tsx and vitest.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

const db = new Database(workerData.file);
db.pragma(`busy_timeout = ${workerData.busyTimeoutMs}`);
// FULL: a commit returns once its WAL frames are synced, so an acknowledged append survives power loss.
db.pragma('synchronous = FULL');
db.defaultSafeIntegers(true);

const stmts = {
  revision: db.prepare('SELECT MAX(revision) AS revision FROM events WHERE stream = ?'),
  byId: db.prepare('SELECT revision FROM events WHERE stream = ? AND id = ?'),
  idsFrom: db.prepare('SELECT id, revision, position FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?'),
  insert: db.prepare('INSERT INTO events (stream, revision, id, type, data, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
  lastOfStream: db.prepare('SELECT revision, position FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1'),
};

/** A refusal, sent back as data: the main thread makes the typed error (WrongExpectedVersion) from it. */
class Refused extends Error {
  constructor(stream, expected, actual) {
    super(`stream ${stream} is at ${String(actual)}, expected ${String(expected)}`);
    this.refusal = { kind: 'wrong_expected_version', stream, expected, actual };
  }
}

/** An append refused after some of its rows were inserted: the transaction around it must roll them back. */
class PartlyWritten extends Error {
  constructor(refusal) {
    super('an append was refused after some of its events were inserted');
    this.refusal = refusal;
  }
}

const isUniqueViolation = (e) => e instanceof Database.SqliteError && e.code.startsWith('SQLITE_CONSTRAINT');

/** The stream's last revision, -1n when absent. */
const currentRevision = (stream) => stmts.revision.get(stream)?.revision ?? -1n;

function expectationHolds(expected, current) {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return current < 0n;
  if (expected === 'stream_exists') return current >= 0n;
  return current === expected;
}

/** The original result when the stream holds exactly these ids from revision `from` on, else undefined. */
function existingBatchAt(stream, from, events) {
  const stored = stmts.idsFrom.all(stream, from, events.length);
  if (stored.length !== events.length || stored.some((s, i) => s.id !== events[i].id)) return undefined;
  const last = stored[stored.length - 1];
  return { nextRevision: last.revision, position: last.position };
}

/** EventStoreDB's rules: check the expected revision, recognise a retried append by its ids, else insert. */
function appendOne(p) {
  const current = currentRevision(p.stream);
  const wrong = () => new Refused(p.stream, p.expected, current < 0n ? 'no_stream' : current);
  if (p.events.length === 0) {
    if (!expectationHolds(p.expected, current)) throw wrong();
    const last = stmts.lastOfStream.get(p.stream);
    return { ok: true, result: { nextRevision: current, position: last?.position ?? -1n }, wrote: false };
  }

  if (typeof p.expected === 'bigint' || p.expected === 'no_stream') {
    const expected = p.expected === 'no_stream' ? -1n : p.expected;
    if (current > expected) {
      // Already past the expected revision: a retry of an append that succeeded, or a real conflict.
      const original = existingBatchAt(p.stream, expected + 1n, p.events);
      if (original) return { ok: true, result: original, wrote: false };
      throw wrong();
    }
    if (current < expected) throw wrong();
  } else {
    const first = stmts.byId.get(p.stream, p.events[0].id);
    if (first) {
      const original = existingBatchAt(p.stream, first.revision, p.events);
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
      const info = stmts.insert.run(p.stream, revision, e.id, e.type, e.data, e.metadata, createdAt);
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

/** A refused append's outcome, as data the main thread turns back into an error. */
const refusedOutcome = (error) =>
  error instanceof Refused
    ? { ok: false, refusal: error.refusal }
    : { ok: false, refusal: { kind: 'error', message: error?.message ?? String(error), code: error?.code } };

// An append refused before its first insert leaves nothing to undo, so the appends of a batch share the one
// transaction without a savepoint each (a savepoint costs about as much as a third of the insert). One refused after
// an insert (an id already further down its stream) aborts the batch, which then runs again with each append in its
// own savepoint (a nested better-sqlite3 transaction), so it alone is rolled back.
const commitBatch = db.transaction((batch) =>
  batch.map((p) => {
    try {
      return appendOne(p);
    } catch (error) {
      if (error instanceof PartlyWritten) throw error;
      return refusedOutcome(error);
    }
  }),
);
const isolated = db.transaction((p) => appendOne(p));
const commitIsolated = db.transaction((batch) =>
  batch.map((p) => {
    try {
      return isolated(p);
    } catch (error) {
      return refusedOutcome(error instanceof PartlyWritten ? error.refusal : error);
    }
  }),
);

parentPort.on('message', ({ seq, batch }) => {
  try {
    let outcomes;
    try {
      outcomes = commitBatch.immediate(batch);
    } catch (e) {
      if (!(e instanceof PartlyWritten)) throw e;
      outcomes = commitIsolated.immediate(batch);
    }
    parentPort.postMessage({ seq, outcomes });
  } catch (e) {
    parentPort.postMessage({ seq, failed: e?.message ?? String(e) });
  }
});
