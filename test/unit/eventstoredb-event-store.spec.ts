/**
 * The EventStoreDB adapter's own logic, without a server: URL, revision and error mapping, the append retry policy,
 * $all paging, event decoding and resubscription. No EventStoreDB can run on this machine, so these tests (and only
 * these) drive the adapter through a scripted stand-in for the client, built from the client's real error classes and
 * real Node streams. The adapter against a real server: test/integration/eventstoredb.spec.ts.
 */
import { createServer, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import {
  ANY,
  BACKWARDS,
  END,
  FORWARDS,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  AccessDeniedError,
  DeadlineExceededError,
  EventStoreDBClient,
  InvalidArgumentError,
  StreamDeletedError,
  StreamNotFoundError,
  UnavailableError,
  WrongExpectedVersionError,
  type AllStreamRecordedEvent,
  type AllStreamResolvedEvent,
  type AppendResult as ClientAppendResult,
  type AppendToStreamOptions,
  type EventData as ClientEventData,
  type ReadAllOptions as ClientReadAllOptions,
  type ReadStreamOptions as ClientReadStreamOptions,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import { describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { isWrongExpectedVersion, type EventData } from '../../src/store/event-store.ts';
import { EventStoreDbEventStore, type EventStoreDbClient } from '../../src/store/eventstoredb-event-store.ts';
import {
  isTransient,
  toBerthError,
  toClientExpectedRevision,
  toConnectionString,
} from '../../src/store/eventstoredb-mapping.ts';
import type { ClientSubscription } from '../../src/store/eventstoredb-subscription.ts';
import { rejection, take } from '../fixtures/subscription-take.ts';

const fast = { attempts: 4, baseDelayMs: 1, maxDelayMs: 2 };

let ids = 0;
const uuid = () => `00000000-0000-4000-8000-${String(++ids).padStart(12, '0')}`;
const event = (type = 't.a', data: unknown = { n: 1 }): EventData => ({ id: uuid(), type, data });

interface RecordShape {
  stream: string;
  revision: bigint;
  position: bigint;
  type?: string;
  data?: unknown;
  metadata?: unknown;
  isJson?: boolean;
}

/** A record as the client hands it over (JSON already parsed by the client when isJson). */
function record(r: RecordShape): AllStreamRecordedEvent {
  return {
    streamId: r.stream,
    id: uuid(),
    revision: r.revision,
    type: r.type ?? 't.a',
    data: r.data ?? { at: Number(r.position) },
    metadata: r.metadata,
    isJson: r.isJson ?? true,
    created: new Date('2026-01-02T03:04:05.678Z'),
    position: { commit: r.position, prepare: r.position },
  } as AllStreamRecordedEvent;
}

type Source = () => AsyncGenerator<AllStreamResolvedEvent> | Readable;

/** A client subscription: a real objectMode Readable (over `source`), with the client's unsubscribe(). */
function clientSubscription(source: Source): ClientSubscription & { unsubscribed: boolean } {
  const events = source();
  const readable = events instanceof Readable ? events : Readable.from(events, { objectMode: true });
  const stream = readable as Readable & ClientSubscription & { unsubscribed: boolean };
  stream.unsubscribed = false;
  stream.unsubscribe = async () => {
    stream.unsubscribed = true;
    stream.destroy();
  };
  return stream;
}

/** A stand-in for EventStoreDBClient: a log of records for reads (positions as the server gives them: forward reads
 * include the start, backward reads exclude it), scripted appends and subscriptions, and every call recorded. */
class ScriptedClient implements EventStoreDbClient {
  log: AllStreamRecordedEvent[] = [];
  appends: { stream: string; events: ClientEventData[]; options: AppendToStreamOptions }[] = [];
  appendScript: (() => Promise<ClientAppendResult>)[] = [];
  readStreams: ClientReadStreamOptions[] = [];
  readAlls: ClientReadAllOptions[] = [];
  subscribes: SubscribeToAllOptions[] = [];
  subscriptionScript: Source[] = [];
  opened: (ClientSubscription & { unsubscribed: boolean })[] = [];
  disposed = false;

  async appendToStream(stream: string, events: ClientEventData[], options: AppendToStreamOptions) {
    this.appends.push({ stream, events, options });
    const next = this.appendScript.shift();
    if (!next) throw new Error('no scripted append left');
    return next();
  }

  async setStreamMetadata(): Promise<ClientAppendResult> {
    throw new Error('no scripted metadata write');
  }

  async deleteStream(): Promise<never> {
    throw new Error('no scripted delete');
  }

  readStream(stream: string, options: ClientReadStreamOptions) {
    this.readStreams.push(options);
    const log = this.log;
    return (async function* () {
      let events = log.filter((e) => e.streamId === stream);
      if (events.length === 0) throw new StreamNotFoundError(undefined, stream);
      const backwards = options.direction === BACKWARDS;
      if (backwards) events = events.reverse();
      const from = options.fromRevision ?? START;
      if (typeof from === 'bigint') events = events.filter((e) => (backwards ? e.revision <= from : e.revision >= from));
      else if ((from === END) !== backwards) events = [];
      for (const event of events.slice(0, Number(options.maxCount ?? Infinity))) yield { event };
    })();
  }

  readAll(options: ClientReadAllOptions) {
    this.readAlls.push(options);
    const log = this.log;
    return (async function* () {
      const backwards = options.direction === BACKWARDS;
      let events = backwards ? [...log].reverse() : log;
      const from = options.fromPosition ?? START;
      if (typeof from === 'object') {
        events = events.filter((e) => (backwards ? e.position.commit < from.commit : e.position.commit >= from.commit));
      } else if ((from === END) !== backwards) events = [];
      for (const event of events.slice(0, Number(options.maxCount ?? Infinity))) yield { event };
    })();
  }

  subscribeToAll(options: SubscribeToAllOptions) {
    this.subscribes.push(options);
    const source = this.subscriptionScript.shift();
    if (!source) throw new Error('no scripted subscription left');
    const sub = clientSubscription(source);
    this.opened.push(sub);
    return sub;
  }

  async dispose() {
    this.disposed = true;
  }
}

const ok = (nextExpectedRevision: bigint, position?: bigint) => async (): Promise<ClientAppendResult> => ({
  success: true,
  nextExpectedRevision,
  position: position === undefined ? undefined : { commit: position, prepare: position },
});
const fail = (error: Error) => async (): Promise<ClientAppendResult> => {
  throw error;
};

describe('EventStoreDB adapter: URLs', () => {
  it('should map eventstoredb:// URLs to the client esdb:// connection strings and pass esdb URLs through', () => {
    expect(toConnectionString('eventstoredb://db.local:2113?tls=false')).toBe('esdb://db.local:2113?tls=false');
    expect(toConnectionString('eventstoredb+discover://admin:changeit@cluster.local:2113?nodePreference=leader')).toBe(
      'esdb+discover://admin:changeit@cluster.local:2113?nodePreference=leader',
    );
    expect(toConnectionString('esdb://a:2113,b:2113?tls=false')).toBe('esdb://a:2113,b:2113?tls=false');
    expect(toConnectionString(' esdb+discover://c:2113 ')).toBe('esdb+discover://c:2113');
  });

  it('should refuse other schemes with invalid_request, masking credentials', () => {
    let error: unknown;
    try {
      toConnectionString('http://admin:secret@db:2113');
    } catch (e) {
      error = e;
    }
    expect(isBerthError(error, 'invalid_request')).toBe(true);
    expect(String((error as Error).message)).not.toContain('secret');
    expect(() => toConnectionString('esdb://')).toThrow(/not an EventStoreDB URL/);
  });

  it('should refuse a URL the client cannot parse with invalid_request', async () => {
    const e = await rejection(EventStoreDbEventStore.connect('eventstoredb://db:notaport?tls=false'));
    expect(isBerthError(e, 'invalid_request'), String(e)).toBe(true);
  });

  it('should fail to connect with unavailable when nothing listens at the address (real client, real socket)', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    const e = await rejection(
      EventStoreDbEventStore.connect(`eventstoredb://127.0.0.1:${port}?tls=false`, { retry: { attempts: 2, baseDelayMs: 1 } }),
    );
    expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
  });
});

describe('EventStoreDB adapter: expected revisions and errors', () => {
  it('should map the port expected revisions to the client constants and refuse a negative revision', () => {
    expect(toClientExpectedRevision('no_stream')).toBe(NO_STREAM);
    expect(toClientExpectedRevision('stream_exists')).toBe(STREAM_EXISTS);
    expect(toClientExpectedRevision('any')).toBe(ANY);
    expect(toClientExpectedRevision(7n)).toBe(7n);
    expect(() => toClientExpectedRevision(-1n)).toThrow(/not a revision/);
  });

  it("should map the client's WrongExpectedVersionError to WrongExpectedVersion with the actual revision", () => {
    const absent = toBerthError(
      new WrongExpectedVersionError(undefined, { streamName: 's-1', expected: 0n, current: 'no_stream' }),
      { stream: 's-1', expected: 0n },
    );
    expect(isWrongExpectedVersion(absent)).toBe(true);
    expect(absent).toMatchObject({ stream: 's-1', expected: 0n, actual: 'no_stream', code: 'wrong_expected_version' });
    const behind = toBerthError(new WrongExpectedVersionError(undefined, { streamName: 's-1', expected: 'no_stream', current: 3n }));
    expect(behind).toMatchObject({ stream: 's-1', expected: 'no_stream', actual: 3n });
    // The legacy append path reports "no stream" as revision -1 and the expectation as its numeric constant.
    const legacy = toBerthError(new WrongExpectedVersionError(undefined, { streamName: 's-2', expected: -4n, current: -1n }));
    expect(legacy).toMatchObject({ stream: 's-2', expected: 'stream_exists', actual: 'no_stream' });
  });

  it('should map missing and deleted streams to not_found, refused arguments to invalid_request', () => {
    expect(toBerthError(new StreamNotFoundError(undefined, 's-9'))).toMatchObject({ code: 'not_found', detail: { stream: 's-9' } });
    expect(toBerthError(StreamDeletedError.fromStreamName('s-8'))).toMatchObject({
      code: 'not_found',
      detail: { stream: 's-8', deleted: true },
    });
    expect(toBerthError(new InvalidArgumentError('bad'))).toMatchObject({ code: 'invalid_request' });
  });

  it('should treat deadline, unavailable and raw gRPC transport failures as transient and map them to unavailable', () => {
    const raw = Object.assign(new Error('14 UNAVAILABLE: read ECONNRESET'), { code: 14, details: 'read ECONNRESET' });
    for (const e of [new DeadlineExceededError(), new UnavailableError(), raw]) {
      expect(isTransient(e)).toBe(true);
      expect(toBerthError(e).code).toBe('unavailable');
    }
    expect(isTransient(new AccessDeniedError())).toBe(false);
    expect(toBerthError(new AccessDeniedError()).code).toBe('internal');
    expect(isTransient(new TypeError('bug'))).toBe(false);
  });
});

describe('EventStoreDB adapter: append', () => {
  it('should repeat an append whose outcome is unknown with the same ids and the same exact revision', async () => {
    const client = new ScriptedClient();
    client.appendScript = [fail(new DeadlineExceededError()), fail(new UnavailableError()), ok(4n, 900n)];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    const events = [event(), event()];
    expect(await store.append('s-1', events, { expectedRevision: 2n })).toEqual({ nextRevision: 4n, position: 900n });
    expect(client.appends).toHaveLength(3);
    for (const call of client.appends) {
      expect(call.stream).toBe('s-1');
      expect(call.options.expectedRevision).toBe(2n);
      expect(call.events.map((e) => e.id)).toEqual(events.map((e) => e.id));
      expect(call.events.map((e) => e.contentType)).toEqual(['application/json', 'application/json']);
    }
  });

  it('should repeat a no_stream append with no_stream, never with any', async () => {
    const client = new ScriptedClient();
    client.appendScript = [fail(new DeadlineExceededError()), ok(0n, 10n)];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    await store.append('s-1', [event()], { expectedRevision: 'no_stream' });
    expect(client.appends.map((a) => a.options.expectedRevision)).toEqual([NO_STREAM, NO_STREAM]);
  });

  it('should give up after the policy attempts with unavailable and an unknown outcome', async () => {
    const client = new ScriptedClient();
    client.appendScript = Array.from({ length: 3 }, () => fail(new DeadlineExceededError()));
    const store = new EventStoreDbEventStore(client, { retry: { ...fast, attempts: 3 } });
    const e = await rejection(store.append('s-1', [event()], { expectedRevision: 0n }));
    expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
    expect((e as { detail: unknown }).detail).toMatchObject({ stream: 's-1', outcome: 'unknown' });
    expect(client.appends).toHaveLength(3);
  });

  it('should not repeat an append with any or stream_exists, whose repeat the server cannot always recognise', async () => {
    for (const expectedRevision of ['any', 'stream_exists'] as const) {
      const client = new ScriptedClient();
      client.appendScript = [fail(new DeadlineExceededError()), ok(0n, 1n)];
      const store = new EventStoreDbEventStore(client, { retry: fast });
      const e = await rejection(store.append('s-1', [event()], { expectedRevision }));
      expect((e as { detail: unknown }).detail).toMatchObject({ outcome: 'unknown' });
      expect(client.appends).toHaveLength(1);
    }
  });

  it('should not repeat a conflict and report the actual revision', async () => {
    const client = new ScriptedClient();
    client.appendScript = [fail(new WrongExpectedVersionError(undefined, { streamName: 's-1', expected: 2n, current: 7n }))];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    const e = await rejection(store.append('s-1', [event()], { expectedRevision: 2n }));
    expect(e).toMatchObject({ code: 'wrong_expected_version', stream: 's-1', expected: 2n, actual: 7n });
    expect(client.appends).toHaveLength(1);
  });

  it('should read the position from the stream when a repeat is answered without one', async () => {
    const client = new ScriptedClient();
    client.log = [record({ stream: 's-1', revision: 0n, position: 40n }), record({ stream: 's-1', revision: 1n, position: 55n })];
    client.appendScript = [ok(1n, 2n ** 64n - 1n)];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    expect(await store.append('s-1', [event(), event()], { expectedRevision: 'no_stream' })).toEqual({
      nextRevision: 1n,
      position: 55n,
    });
  });

  it('should refuse ids that are not distinct uuids and data that is not JSON before calling the client', async () => {
    const client = new ScriptedClient();
    const store = new EventStoreDbEventStore(client, { retry: fast });
    const twice = event();
    for (const events of [
      [{ ...event(), id: 'op-1' }],
      [twice, { ...twice }],
      [event('t.a', { big: 1n })],
      [{ ...event(), type: '' }],
    ]) {
      expect(await rejection(store.append('s-1', events, { expectedRevision: 'any' }))).toMatchObject({ code: 'invalid_request' });
    }
    expect(client.appends).toHaveLength(0);
  });

  it('should check an empty append against the stream without writing', async () => {
    const client = new ScriptedClient();
    client.log = [record({ stream: 's-1', revision: 0n, position: 40n })];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    expect(await store.append('s-1', [], { expectedRevision: 0n })).toEqual({ nextRevision: 0n, position: 40n });
    expect(await store.append('s-2', [], { expectedRevision: 'no_stream' })).toEqual({ nextRevision: -1n, position: -1n });
    expect(await rejection(store.append('s-1', [], { expectedRevision: 'no_stream' }))).toMatchObject({ actual: 0n });
    expect(client.appends).toHaveLength(0);
  });
});

describe('EventStoreDB adapter: reads', () => {
  it('should map recorded events and pass direction, start and count to the client', async () => {
    const client = new ScriptedClient();
    client.log = [0n, 1n, 2n, 3n].map((revision) =>
      record({ stream: 's-1', revision, position: 100n + revision, metadata: revision === 3n ? { by: 'x' } : undefined }),
    );
    const store = new EventStoreDbEventStore(client, { retry: fast });
    const got = await store.readStream('s-1', { direction: 'backwards', from: 3n, maxCount: 2 });
    expect(client.readStreams.at(-1)).toMatchObject({ direction: BACKWARDS, fromRevision: 3n, maxCount: 2 });
    expect(got.map((e) => [e.revision, e.position])).toEqual([
      [3n, 103n],
      [2n, 102n],
    ]);
    expect(got[0]).toMatchObject({ stream: 's-1', type: 't.a', data: { at: 103 }, metadata: { by: 'x' } });
    expect(got[0].createdAt).toBe('2026-01-02T03:04:05.678Z');
    expect(got[1].metadata).toEqual({});
    await store.readStream('s-1');
    expect(client.readStreams.at(-1)).toMatchObject({ direction: FORWARDS, fromRevision: START });
  });

  it('should fail with not_found for an absent stream and report it as no_stream', async () => {
    const store = new EventStoreDbEventStore(new ScriptedClient(), { retry: fast });
    expect(await rejection(store.readStream('s-404'))).toMatchObject({ code: 'not_found', detail: { stream: 's-404' } });
    expect(await store.streamRevision('s-404')).toBe('no_stream');
  });

  it('should report an event whose data or metadata is not JSON as corrupt, and accept binary JSON', async () => {
    const client = new ScriptedClient();
    const bytes = (s: string) => new TextEncoder().encode(s);
    client.log = [
      record({ stream: 's-1', revision: 0n, position: 1n, isJson: false, data: bytes('{"ok":true}') }),
      record({ stream: 's-2', revision: 0n, position: 2n, isJson: false, data: bytes('not json') }),
      record({ stream: 's-3', revision: 0n, position: 3n, metadata: bytes('{oops') }),
      record({ stream: 's-4', revision: 0n, position: 4n, metadata: ['not', 'an', 'object'] }),
    ];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    expect((await store.readStream('s-1'))[0].data).toEqual({ ok: true });
    for (const s of ['s-2', 's-3', 's-4']) {
      expect(await rejection(store.readStream(s))).toMatchObject({ code: 'corrupt_event', detail: { stream: s, revision: '0' } });
    }
  });

  it('should read $all strictly after the position, without system events, paging as needed', async () => {
    const client = new ScriptedClient();
    // 300 records, every third one a system event; positions 10, 20, 30…
    client.log = Array.from({ length: 300 }, (_, i) =>
      i % 3 === 2
        ? record({ stream: '$stats-1', revision: BigInt(i), position: BigInt(10 * (i + 1)), type: '$statsCollected' })
        : record({ stream: `s-${i % 7}`, revision: BigInt(i), position: BigInt(10 * (i + 1)) }),
    );
    const store = new EventStoreDbEventStore(client, { retry: fast, pageSize: 64 });
    const mine = client.log.filter((e) => !e.streamId.startsWith('$'));

    const all = await store.readAll();
    expect(all.map((e) => e.position)).toEqual(mine.map((e) => e.position.commit));
    expect(client.readAlls.length).toBeGreaterThan(1);

    const after = await store.readAll({ fromPosition: 110n, maxCount: 100 });
    expect(after[0].position).toBe(130n);
    expect(after).toHaveLength(100);
    expect(after.map((e) => e.position)).toEqual(mine.filter((e) => e.position.commit > 110n).slice(0, 100).map((e) => e.position.commit));
    expect(await store.readAll({ fromPosition: 3000n })).toEqual([]);
  });

  it('should give the newest position that is not a system event, -1 when there is none', async () => {
    const client = new ScriptedClient();
    client.log = [
      record({ stream: 's-1', revision: 0n, position: 5n }),
      ...Array.from({ length: 150 }, (_, i) => record({ stream: '$ce-s', revision: BigInt(i), position: BigInt(10 + i), type: '$>' })),
    ];
    const store = new EventStoreDbEventStore(client, { retry: fast });
    expect(await store.headPosition()).toBe(5n);
    client.log = client.log.slice(1);
    expect(await store.headPosition()).toBe(-1n);
  });
});

describe('EventStoreDB adapter: subscriptions', () => {
  const resolved = (r: RecordShape): AllStreamResolvedEvent => ({ event: record(r) });
  const s1 = (n: number) => resolved({ stream: 's-1', revision: BigInt(n), position: BigInt(100 + n) });

  it('should resubscribe after a drop from the last delivered event, with no gap and no duplicate', async () => {
    const client = new ScriptedClient();
    client.subscriptionScript = [
      async function* () {
        yield s1(1);
        yield s1(2);
        throw new UnavailableError();
      },
      async function* () {
        throw new DeadlineExceededError();
      },
      async function* () {
        yield s1(2); // a server that started inclusively would repeat the checkpoint event: it is not delivered twice
        yield s1(3);
        yield s1(4);
      },
    ];
    const store = new EventStoreDbEventStore(client, { resubscribe: fast });
    const sub = store.subscribeToAll({ fromPosition: 100n, filter: { streamPrefixes: ['s-'] } });
    const got = await take(sub, 4);
    expect(got.map((e) => e.revision)).toEqual([1n, 2n, 3n, 4n]);
    expect(client.subscribes.map((s) => s.fromPosition)).toEqual([
      { commit: 100n, prepare: 100n },
      { commit: 102n, prepare: 102n },
      { commit: 102n, prepare: 102n },
    ]);
    expect(client.opened.slice(0, 2).every((s) => s.unsubscribed)).toBe(true);
    await sub.close();
  });

  it('should filter stream names on the server, event types and system events on the client', async () => {
    const client = new ScriptedClient();
    client.subscriptionScript = [
      async function* () {
        yield resolved({ stream: 'job-1', revision: 0n, position: 1n, type: 'job.started' });
        yield resolved({ stream: 'job-1', revision: 1n, position: 2n, type: 'other.thing' });
        yield resolved({ stream: '$ce-job', revision: 0n, position: 3n, type: '$>' });
        yield resolved({ stream: 'job-1', revision: 2n, position: 4n, type: '$metadata' });
        yield resolved({ stream: 'job-2', revision: 0n, position: 5n, type: 'job.ended' });
      },
    ];
    const store = new EventStoreDbEventStore(client, { resubscribe: fast });
    const sub = store.subscribeToAll({ filter: { streamPrefixes: ['job-'], eventTypePrefixes: ['job.'] } });
    expect((await take(sub, 2)).map((e) => e.position)).toEqual([1n, 5n]);
    expect(client.subscribes[0].fromPosition).toBe(START);
    expect(client.subscribes[0].filter).toMatchObject({ filterOn: 'streamName', prefixes: ['job-'] });
    await sub.close();

    // The client subscription opens on the first read.
    const quiet = () => new Readable({ objectMode: true, read() {} });
    client.subscriptionScript = [quiet, quiet];
    void store.subscribeToAll({ filter: { eventTypePrefixes: ['job.'] } })[Symbol.asyncIterator]().next();
    void store.subscribeToAll()[Symbol.asyncIterator]().next();
    expect(client.subscribes[1].filter).toMatchObject({ filterOn: 'eventType', prefixes: ['job.'] });
    expect(client.subscribes[2].filter).toMatchObject({ filterOn: 'eventType', regex: '^[^$].*' });
    await store.close();
  });

  it('should give up with unavailable after the allowed consecutive failures, and at once on a refusal', async () => {
    const client = new ScriptedClient();
    client.subscriptionScript = Array.from({ length: 3 }, () => async function* () {
      throw new UnavailableError();
    });
    const store = new EventStoreDbEventStore(client, { resubscribe: { ...fast, attempts: 3 } });
    const e = await rejection(take(store.subscribeToAll(), 1));
    expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
    expect(client.subscribes).toHaveLength(3);

    client.subscriptionScript = [
      async function* () {
        throw new AccessDeniedError();
      },
    ];
    expect(await rejection(take(store.subscribeToAll(), 1))).toMatchObject({ code: 'internal' });
    expect(client.subscribes).toHaveLength(4);
  });

  it('should end a waiting read and unsubscribe on close', async () => {
    const client = new ScriptedClient();
    client.subscriptionScript = [() => new Readable({ objectMode: true, read() {} })]; // live, nothing new
    const store = new EventStoreDbEventStore(client, { resubscribe: fast });
    const sub = store.subscribeToAll();
    const pending = sub[Symbol.asyncIterator]().next();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await store.close();
    expect((await pending).done).toBe(true);
    expect(client.opened[0].unsubscribed).toBe(true);
    expect(client.disposed).toBe(true);
  });

  it('should offer an event that does not decode again instead of skipping it', async () => {
    const client = new ScriptedClient();
    client.subscriptionScript = [
      async function* () {
        yield resolved({ stream: 's-1', revision: 0n, position: 1n, isJson: false, data: new Uint8Array([0xff]) });
        yield s1(1);
      },
    ];
    const store = new EventStoreDbEventStore(client, { resubscribe: fast });
    const it = store.subscribeToAll()[Symbol.asyncIterator]();
    expect(await rejection(it.next())).toMatchObject({ code: 'corrupt_event' });
    expect(await rejection(it.next())).toMatchObject({ code: 'corrupt_event' });
    await store.close();
  });
});

describe('EventStoreDB adapter: the real client against a server that accepts and never answers', () => {
  // A TCP listener that says nothing: the client's connection opens, and no call is ever answered.
  async function silentServer() {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const store = new EventStoreDbEventStore(EventStoreDBClient.connectionString(`esdb://127.0.0.1:${port}?tls=false`), {
      retry: { attempts: 2, baseDelayMs: 1 },
      timeoutMs: 150,
    });
    const stop = async () => {
      await store.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    };
    return { store, stop };
  }

  it('should report an unanswered append as unavailable with an unknown outcome, after its retries', async () => {
    const { store, stop } = await silentServer();
    try {
      const started = Date.now();
      const e = await rejection(store.append('s-1', [event()], { expectedRevision: 'no_stream' }));
      expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
      expect((e as { detail: unknown }).detail).toMatchObject({ outcome: 'unknown' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(2 * 150);
      expect(await rejection(store.readStream('s-1'))).toMatchObject({ code: 'unavailable' });
    } finally {
      await stop();
    }
  });

  it('should end a waiting subscription read on close', async () => {
    const { store, stop } = await silentServer();
    try {
      const sub = store.subscribeToAll({ filter: { streamPrefixes: ['s-'] } });
      const pending = sub[Symbol.asyncIterator]().next();
      await new Promise((resolve) => setTimeout(resolve, 100));
      await sub.close();
      expect((await pending).done).toBe(true);
    } finally {
      await stop();
    }
  });
});
