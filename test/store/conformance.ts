/**
 * The event store contract (DESIGN §3) as one vitest suite that every adapter runs. Streams, ids and event types are
 * unique per run and nothing assumes an empty store, so it can run against a shared, long-lived EventStoreDB.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import {
  isWrongExpectedVersion,
  type AppendResult,
  type EventData,
  type EventStore,
  type RecordedEvent,
  type Subscription,
  type SubscriptionFilter,
} from '../../src/store/event-store.ts';

export interface ConformanceOptions {
  /** When set, the whole suite is skipped and this reason shows in its name. */
  skip?: string;
}

const event = (type: string, data: unknown = {}, metadata?: Record<string, unknown>): EventData => ({
  id: randomUUID(),
  type,
  data,
  metadata,
});

/** The error an append fails with, or a test failure when it succeeds. */
async function appendError(p: Promise<AppendResult>): Promise<unknown> {
  try {
    const result = await p;
    throw new Error(`append succeeded unexpectedly: ${JSON.stringify(result, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`);
  } catch (e) {
    return e;
  }
}

async function expectWrongVersion(p: Promise<AppendResult>, actual: bigint | 'no_stream'): Promise<void> {
  const e = await appendError(p);
  expect(isWrongExpectedVersion(e), String(e)).toBe(true);
  expect(isBerthError(e, 'wrong_expected_version')).toBe(true);
  expect((e as { actual: unknown }).actual).toBe(actual);
}

/** Reads `count` events from a subscription, failing with what it got if they do not arrive in time. */
async function take(sub: Subscription, count: number, timeoutMs = 15_000): Promise<RecordedEvent[]> {
  const got: RecordedEvent[] = [];
  const it = sub[Symbol.asyncIterator]();
  const deadline = Date.now() + timeoutMs;
  while (got.length < count) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`subscription delivered ${got.length} of ${count} events in ${timeoutMs} ms`)),
        Math.max(0, deadline - Date.now()),
      );
    });
    try {
      const next = await Promise.race([it.next(), timeout]);
      if (next.done) throw new Error(`subscription ended after ${got.length} of ${count} events`);
      got.push(next.value);
    } finally {
      clearTimeout(timer);
    }
  }
  return got;
}

/** Every event of the store after `from` (exclusive) up to `until` (inclusive) that passes `keep`, paging readAll. */
async function readAllBetween(
  store: EventStore,
  from: bigint,
  until: bigint,
  keep: (e: RecordedEvent) => boolean,
): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  let after = from;
  while (after < until) {
    const page = await store.readAll({ fromPosition: after, maxCount: 500 });
    if (page.length === 0) break;
    for (const e of page) if (e.position <= until && keep(e)) out.push(e);
    after = page[page.length - 1].position;
  }
  return out;
}

const ids = (events: { id: string }[]) => events.map((e) => e.id);

export function eventStoreConformance(
  name: string,
  open: () => Promise<EventStore>,
  opts: ConformanceOptions = {},
): void {
  const suite = opts.skip ? describe.skip : describe;
  suite(`event store conformance: ${name}${opts.skip ? ` (skipped: ${opts.skip})` : ''}`, () => {
    let store: EventStore;
    const run = randomUUID().slice(0, 8);
    let counter = 0;
    /** A fresh stream name `<category>-<id>` in this run's own category. */
    const stream = (category = 'conf') => `${category}${run}-${++counter}`;

    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    describe('append and expected revisions', () => {
      it('should create a stream with no_stream and refuse no_stream once it exists', async () => {
        const s = stream();
        const first = await store.append(s, [event('t.a'), event('t.b')], { expectedRevision: 'no_stream' });
        expect(first.nextRevision).toBe(1n);
        expect(typeof first.position).toBe('bigint');
        await expectWrongVersion(store.append(s, [event('t.c')], { expectedRevision: 'no_stream' }), 1n);
        expect(await store.streamRevision(s)).toBe(1n);
      });

      it('should accept an exact revision that matches and refuse stale or future ones with the actual revision', async () => {
        const s = stream();
        await store.append(s, [event('t.a')], { expectedRevision: 'no_stream' });
        const second = await store.append(s, [event('t.b')], { expectedRevision: 0n });
        expect(second.nextRevision).toBe(1n);
        await expectWrongVersion(store.append(s, [event('t.c')], { expectedRevision: 0n }), 1n);
        await expectWrongVersion(store.append(s, [event('t.c')], { expectedRevision: 5n }), 1n);
        const third = await store.append(s, [event('t.c'), event('t.d')], { expectedRevision: 1n });
        expect(third.nextRevision).toBe(3n);
        expect(third.position).toBeGreaterThan(second.position);
      });

      it('should refuse an exact revision on an absent stream with actual no_stream', async () => {
        await expectWrongVersion(store.append(stream(), [event('t.a')], { expectedRevision: 0n }), 'no_stream');
      });

      it('should refuse stream_exists on an absent stream and accept it on an existing one', async () => {
        const s = stream();
        await expectWrongVersion(store.append(s, [event('t.a')], { expectedRevision: 'stream_exists' }), 'no_stream');
        expect(await store.streamRevision(s)).toBe('no_stream');
        await store.append(s, [event('t.a')], { expectedRevision: 'no_stream' });
        const r = await store.append(s, [event('t.b')], { expectedRevision: 'stream_exists' });
        expect(r.nextRevision).toBe(1n);
      });

      it('should accept any on an absent and on an existing stream', async () => {
        const s = stream();
        expect((await store.append(s, [event('t.a')], { expectedRevision: 'any' })).nextRevision).toBe(0n);
        expect((await store.append(s, [event('t.b')], { expectedRevision: 'any' })).nextRevision).toBe(1n);
      });

      it('should let exactly one of several racing appends with the same expected revision win', async () => {
        const s = stream();
        await store.append(s, [event('t.a')], { expectedRevision: 'no_stream' });
        const outcomes = await Promise.allSettled(
          Array.from({ length: 5 }, () => store.append(s, [event('t.b')], { expectedRevision: 0n })),
        );
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
        for (const o of outcomes) {
          if (o.status === 'rejected') {
            expect(isWrongExpectedVersion(o.reason)).toBe(true);
            expect(o.reason.actual).toBe(1n);
          }
        }
        expect(await store.readStream(s)).toHaveLength(2);
      });

      it('should round-trip data, metadata, type and id, with bigint revisions and positions', async () => {
        const s = stream();
        const e = event('t.shaped', { n: 1, nested: { list: [1, 'two', null] }, text: 'é✓' }, { correlationId: 'c-1' });
        const bare = event('t.bare', { ok: true });
        const r = await store.append(s, [e, bare], { expectedRevision: 'no_stream' });
        const [got, gotBare] = await store.readStream(s);
        expect(got).toMatchObject({ id: e.id, stream: s, revision: 0n, type: 't.shaped', data: e.data });
        expect(got.metadata).toMatchObject({ correlationId: 'c-1' });
        expect(gotBare.metadata).toEqual({});
        expect(gotBare.position).toBe(r.position);
        expect(got.position).toBeLessThan(gotBare.position);
        expect(Number.isNaN(Date.parse(got.createdAt))).toBe(false);
        expect(await store.headPosition()).toBeGreaterThanOrEqual(r.position);
      });
    });

    describe('idempotent re-append', () => {
      it('should return the original result and write nothing when the same ids are re-appended at the same revision', async () => {
        const s = stream();
        const batch = [event('t.a'), event('t.b')];
        const first = await store.append(s, batch, { expectedRevision: 'no_stream' });
        const again = await store.append(s, batch, { expectedRevision: 'no_stream' });
        expect(again).toEqual(first);
        const next = [event('t.c')];
        const third = await store.append(s, next, { expectedRevision: 1n });
        expect(await store.append(s, next, { expectedRevision: 1n })).toEqual(third);
        expect(ids(await store.readStream(s))).toEqual(ids([...batch, ...next]));
      });

      it('should treat a re-append with any as idempotent when the whole batch is already stored', async () => {
        const s = stream();
        const batch = [event('t.a'), event('t.b')];
        const first = await store.append(s, batch, { expectedRevision: 'any' });
        await store.append(s, [event('t.c')], { expectedRevision: 'any' });
        expect(await store.append(s, batch, { expectedRevision: 'any' })).toEqual(first);
        expect(await store.readStream(s)).toHaveLength(3);
      });

      it('should refuse a batch that only partly matches stored events', async () => {
        const s = stream();
        const [a, b] = [event('t.a'), event('t.b')];
        await store.append(s, [a, b], { expectedRevision: 'no_stream' });
        await expectWrongVersion(store.append(s, [a, event('t.x')], { expectedRevision: 'no_stream' }), 1n);
        expect(ids(await store.readStream(s))).toEqual(ids([a, b]));
      });

      it('should allow the same event id in two different streams', async () => {
        const e = event('t.a');
        await store.append(stream(), [e], { expectedRevision: 'no_stream' });
        const other = stream();
        await store.append(other, [e], { expectedRevision: 'no_stream' });
        expect(ids(await store.readStream(other))).toEqual([e.id]);
      });
    });

    describe('readStream', () => {
      let s: string;
      let written: EventData[];
      beforeAll(async () => {
        s = stream();
        written = Array.from({ length: 5 }, (_, i) => event(`t.n${i}`, { i }));
        await store.append(s, written.slice(0, 2), { expectedRevision: 'no_stream' });
        await store.append(s, written.slice(2), { expectedRevision: 1n });
      });

      it('should read forwards from the start, from a revision, and up to maxCount', async () => {
        const all = await store.readStream(s);
        expect(all.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n, 4n]);
        expect(ids(all)).toEqual(ids(written));
        expect((await store.readStream(s, { from: 2n, maxCount: 2 })).map((e) => e.revision)).toEqual([2n, 3n]);
        expect((await store.readStream(s, { maxCount: 1 })).map((e) => e.revision)).toEqual([0n]);
        expect(await store.readStream(s, { from: 9n })).toEqual([]);
      });

      it('should read backwards from the end and from a revision', async () => {
        const back = await store.readStream(s, { direction: 'backwards', maxCount: 2 });
        expect(back.map((e) => e.revision)).toEqual([4n, 3n]);
        const fromTwo = await store.readStream(s, { direction: 'backwards', from: 2n });
        expect(fromTwo.map((e) => e.revision)).toEqual([2n, 1n, 0n]);
        const fromEnd = await store.readStream(s, { direction: 'backwards', from: 'end' });
        expect(ids(fromEnd)).toEqual(ids(written).reverse());
      });

      it('should give positions increasing with revisions', async () => {
        const all = await store.readStream(s);
        for (let i = 1; i < all.length; i++) expect(all[i].position).toBeGreaterThan(all[i - 1].position);
      });

      it('should fail with not_found for an absent stream, and report its revision as no_stream', async () => {
        const absent = stream('absent');
        const e = await store.readStream(absent).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(isBerthError(e, 'not_found'), String(e)).toBe(true);
        await expect(store.readStream(absent, { direction: 'backwards' })).rejects.toMatchObject({ code: 'not_found' });
        expect(await store.streamRevision(absent)).toBe('no_stream');
      });
    });

    describe('readStreams (optional)', () => {
      /** What `readStreams` returns of a recorded event. */
      const asStreamEvent = ({ stream, revision, type, data, metadata }: RecordedEvent) => ({ stream, revision, type, data, metadata });

      it('should read each stream from its own revision in revision order, across chunks, leaving out streams with nothing there', async (ctx) => {
        if (!store.readStreams) return ctx.skip();
        const long = stream();
        const longEvents = Array.from({ length: 5 }, (_, i) => event('t.n', { i }, { i, by: 'conformance' }));
        await store.append(long, longEvents.slice(0, 3), { expectedRevision: 'no_stream' });
        const others = Array.from({ length: 300 }, () => stream());
        const otherEvents = new Map(others.map((s) => [s, event('t.o', { s })]));
        await Promise.all(others.map((s) => store.append(s, [otherEvents.get(s)!], { expectedRevision: 'no_stream' })));
        // Appended after the others, so its revisions are not adjacent in the log.
        await store.append(long, longEvents.slice(3), { expectedRevision: 2n });
        const ended = stream();
        await store.append(ended, [event('t.e')], { expectedRevision: 'no_stream' });
        const absent = stream('absent');

        const read = await store.readStreams([
          ...others.map((s) => ({ stream: s, from: 0n })),
          { stream: long, from: 1n },
          { stream: ended, from: 1n },
          { stream: absent, from: 0n },
        ]);
        expect([...read.keys()].sort()).toEqual([...others, long].sort());
        expect(read.get(long)!.map((e) => e.revision)).toEqual([1n, 2n, 3n, 4n]);
        expect(read.get(long)!.map((e) => e.data)).toEqual(longEvents.slice(1).map((e) => e.data));
        expect(read.get(long)).toEqual((await store.readStream(long, { from: 1n })).map(asStreamEvent));
        for (const s of others) expect(read.get(s)).toEqual((await store.readStream(s)).map(asStreamEvent));
      });
    });

    describe('readAll', () => {
      it('should read in global order, strictly after the given position, up to maxCount', async () => {
        const head = await store.headPosition();
        const category = `all${run}`;
        const written: EventData[] = [];
        let last: AppendResult | undefined;
        for (let i = 0; i < 4; i++) {
          const batch = [event('t.x', { i }), event('t.y', { i })];
          written.push(...batch);
          last = await store.append(`${category}-${i % 2}`, batch, { expectedRevision: 'any' });
        }
        const mine = await readAllBetween(store, head, last!.position, (e) => e.stream.startsWith(category));
        expect(ids(mine)).toEqual(ids(written));
        for (let i = 1; i < mine.length; i++) expect(mine[i].position).toBeGreaterThan(mine[i - 1].position);

        const after = await store.readAll({ fromPosition: mine[0].position, maxCount: 3 });
        expect(after.length).toBeGreaterThan(0);
        expect(after.length).toBeLessThanOrEqual(3);
        expect(after.every((e) => e.position > mine[0].position)).toBe(true);
        expect(ids(after)).not.toContain(mine[0].id);
        const afterMine = await readAllBetween(store, mine[0].position, last!.position, (e) => e.stream.startsWith(category));
        expect(ids(afterMine)).toEqual(ids(written.slice(1)));
      });
    });

    describe('compactStream', () => {
      it('should leave the summary as the stream\'s first event at its own revision, drop the named streams and move no other event', async () => {
        const s = stream();
        const other = stream();
        const snapshots = stream('snap');
        await store.append(s, [event('t.a')], { expectedRevision: 'no_stream' });
        const between = await store.append(other, [event('t.o'), event('t.o')], { expectedRevision: 'no_stream' });
        await store.append(s, [event('t.b'), event('t.c')], { expectedRevision: 0n });
        await store.append(snapshots, [event('t.snap')], { expectedRevision: 'no_stream' });
        const otherBefore = await store.readStream(other);
        const summary = event('t.summary', { kept: true });

        const done = await store.compactStream(s, summary, { expectedRevision: 2n, dropStreams: [snapshots] });
        expect(done.nextRevision).toBe(3n);
        expect(done.position).toBeGreaterThan(between.position);

        const left = await store.readStream(s);
        expect(left.map((e) => [e.id, e.revision, e.type, e.data])).toEqual([[summary.id, 3n, 't.summary', { kept: true }]]);
        expect(await store.readStream(s, { from: 0n })).toHaveLength(1);
        expect(await store.streamRevision(s)).toBe(3n);
        expect(await store.streamRevision(snapshots)).toBe('no_stream');
        const otherAfter = await store.readStream(other);
        expect(otherAfter.map((e) => [e.id, e.position])).toEqual(otherBefore.map((e) => [e.id, e.position]));

        // The stream goes on after its summary.
        const next = await store.append(s, [event('t.d')], { expectedRevision: 3n });
        expect(next.nextRevision).toBe(4n);
        expect((await store.readStream(s)).map((e) => e.revision)).toEqual([3n, 4n]);
      });

      it('should refuse a stale expected revision and remove nothing', async () => {
        const s = stream();
        await store.append(s, [event('t.a'), event('t.b')], { expectedRevision: 'no_stream' });
        await expectWrongVersion(store.compactStream(s, event('t.summary'), { expectedRevision: 0n }), 1n);
        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['t.a', 't.b']);
      });

      it('should treat a repeat of the same summary at the same revision as done', async () => {
        const s = stream();
        await store.append(s, [event('t.a')], { expectedRevision: 'no_stream' });
        const summary = event('t.summary');
        const first = await store.compactStream(s, summary, { expectedRevision: 0n });
        const again = await store.compactStream(s, summary, { expectedRevision: 0n });
        expect(again).toEqual(first);
        expect((await store.readStream(s)).map((e) => e.id)).toEqual([summary.id]);
      });
    });

    describe('subscribeToAll', () => {
      it('should deliver catch-up then live events with no gap and no duplicate while appends race', async () => {
        const category = `sub${run}`;
        const head = await store.headPosition();
        // Catch-up part: written before the subscription exists.
        const acked: { id: string; position: bigint }[] = [];
        for (let i = 0; i < 10; i++) {
          const e = event('t.before', { i });
          acked.push({ id: e.id, position: (await store.append(`${category}-pre`, [e], { expectedRevision: 'any' })).position });
        }
        const sub = store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [category] } });
        try {
          const appenders = 4;
          const perAppender = 25;
          // Live part: several writers race each other and the reader; single-event appends, so each ack has its position.
          const writers = Array.from({ length: appenders }, async (_, w) => {
            for (let i = 0; i < perAppender; i++) {
              const e = event('t.live', { w, i });
              const r = await store.append(`${category}-w${w}`, [e], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
              acked.push({ id: e.id, position: r.position });
              if (i % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
            }
          });
          const [got] = await Promise.all([take(sub, 10 + appenders * perAppender), ...writers]);

          expect(new Set(ids(got)).size).toBe(got.length);
          for (let i = 1; i < got.length; i++) expect(got[i].position).toBeGreaterThan(got[i - 1].position);
          const ackedPosition = new Map(acked.map((a) => [a.id, a.position]));
          for (const e of got) expect(e.position).toBe(ackedPosition.get(e.id));
          // The subscription saw exactly what the store holds for these streams, in the same order.
          const stored = await readAllBetween(store, head, got[got.length - 1].position, (e) => e.stream.startsWith(category));
          expect(ids(got)).toEqual(ids(stored));
        } finally {
          await sub.close();
        }
      });

      it('should resume strictly after the given position', async () => {
        const s = stream(`resume${run}x`);
        const written = Array.from({ length: 6 }, (_, i) => event('t.r', { i }));
        await store.append(s, written, { expectedRevision: 'no_stream' });
        const stored = await store.readStream(s);
        const sub = store.subscribeToAll({ fromPosition: stored[2].position, filter: { streamPrefixes: [s] } });
        try {
          expect(ids(await take(sub, 3))).toEqual(ids(written.slice(3)));
        } finally {
          await sub.close();
        }
      });

      it('should filter by stream prefix, by event-type prefix, and by both', async () => {
        const head = await store.headPosition();
        const a = `filta${run}`;
        const b = `filtb${run}`;
        const kept = `k${run}.`;
        const other = `o${run}.`;
        const written = [
          { s: `${a}-1`, e: event(`${kept}one`) },
          { s: `${b}-1`, e: event(`${kept}two`) },
          { s: `${a}-1`, e: event(`${other}three`) },
          { s: `${b}-1`, e: event(`${other}four`) },
          { s: `${a}-2`, e: event(`${kept}five`) },
        ];
        for (const w of written) await store.append(w.s, [w.e], { expectedRevision: 'any' });
        const expectFiltered = async (filter: SubscriptionFilter, expected: number[]) => {
          const sub = store.subscribeToAll({ fromPosition: head, filter });
          try {
            expect(ids(await take(sub, expected.length))).toEqual(expected.map((i) => written[i].e.id));
          } finally {
            await sub.close();
          }
        };
        await expectFiltered({ streamPrefixes: [a] }, [0, 2, 4]);
        await expectFiltered({ streamPrefixes: [a, b] }, [0, 1, 2, 3, 4]);
        await expectFiltered({ eventTypePrefixes: [kept] }, [0, 1, 4]);
        await expectFiltered({ streamPrefixes: [b], eventTypePrefixes: [kept] }, [1]);
      });

      it("should pass over the events its skip test names, by stream, revision and position, and deliver the rest whole", async () => {
        const head = await store.headPosition();
        const a = `skipa${run}`;
        const b = `skipb${run}`;
        const written = [
          { s: a, e: event('t.one', { n: 1 }) },
          { s: b, e: event('t.two', { n: 2 }) },
          { s: a, e: event('t.three', { n: 3 }) },
          { s: b, e: event('t.four', { n: 4 }) },
          { s: a, e: event('t.five', { n: 5 }) },
        ];
        const positions: bigint[] = [];
        for (const w of written) positions.push((await store.append(w.s, [w.e], { expectedRevision: 'any' })).position);
        const seen: { stream: string; revision: bigint; position: bigint }[] = [];
        // Later events of b are passed over; its first, and a's, come through.
        const skip = (at: { stream: string; revision: bigint; position: bigint }) => (seen.push(at), at.stream === b && at.revision > 0n);
        const sub = store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [a, b], skip } });
        try {
          const got = await take(sub, 4);
          expect(ids(got)).toEqual([0, 1, 2, 4].map((i) => written[i].e.id));
          expect(got.map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 5 }]);
        } finally {
          await sub.close();
        }
        expect(seen.slice(0, 5)).toEqual([
          { stream: a, revision: 0n, position: positions[0] },
          { stream: b, revision: 0n, position: positions[1] },
          { stream: a, revision: 1n, position: positions[2] },
          { stream: b, revision: 1n, position: positions[3] },
          { stream: a, revision: 2n, position: positions[4] },
        ]);
      });

      it('should read nothing until its pace lets it, then deliver as usual', async () => {
        const head = await store.headPosition();
        const stream = `paced${run}`;
        const written = [event('t.one'), event('t.two'), event('t.three')];
        await store.append(stream, written, { expectedRevision: 'no_stream' });
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        let paces = 0;
        const sub = store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [stream] }, pace: () => (paces++, gate) });
        try {
          let got: RecordedEvent[] | undefined;
          const taking = take(sub, 3).then((events) => (got = events));
          await new Promise((resolve) => setTimeout(resolve, 50));
          expect(got).toBeUndefined();
          expect(paces).toBe(1);
          release();
          await taking;
          expect(ids(got!)).toEqual(written.map((e) => e.id));
        } finally {
          await sub.close();
        }
      });

      it('should end by itself past `until`, whether the event there is delivered or passed over', async () => {
        const head = await store.headPosition();
        const stream = `until${run}`;
        const written = [event('t.one'), event('t.two'), event('t.three')];
        await store.append(stream, written, { expectedRevision: 'no_stream' });
        // The listing's end is another stream's event: a filter by stream (applied by the server, where there is one)
        // would never see it go by.
        const { position: end } = await store.append(`past${run}`, [event('t.after')], { expectedRevision: 'no_stream' });
        await store.append(`past${run}`, [event('t.later')], { expectedRevision: 0n });
        const listed = async (skip?: (at: { revision: bigint }) => boolean) => {
          const got: RecordedEvent[] = [];
          for await (const e of store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [stream], ...(skip ? { skip } : {}) }, until: end })) got.push(e);
          return ids(got);
        };
        expect(await listed()).toEqual(written.map((e) => e.id));
        // The last event up to `until` passed over: it ends all the same, with nothing past it.
        expect(await listed((at) => at.revision === 2n)).toEqual(written.slice(0, 2).map((e) => e.id));
        // Nothing of the filter's up to `until`: it ends too, rather than waiting live.
        expect(await listed(() => true)).toEqual([]);
      });

      it('should end a waiting iteration when the subscription is closed', async () => {
        const sub = store.subscribeToAll({ fromPosition: await store.headPosition(), filter: { streamPrefixes: [`never${run}`] } });
        const pending = sub[Symbol.asyncIterator]().next();
        await new Promise((resolve) => setTimeout(resolve, 50));
        await sub.close();
        expect((await pending).done).toBe(true);
      });
    });
  });
}

