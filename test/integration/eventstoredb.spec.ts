/**
 * The EventStoreDB adapter over the gRPC protocol: the shared conformance suite, then what only this adapter has
 * (positions as the server records them, retried appends, resubscription after a drop). Against the server that
 * BERTH_EVENTSTORE_URL names, e.g. `esdb://localhost:2113?tls=false` (EventStoreDB 22.6+ or KurrentDB); otherwise
 * against the protocol-level test server (test/esdb-server), started here.
 */
import { randomUUID } from 'node:crypto';
import {
  DeadlineExceededError,
  EventStoreDBClient,
  UnavailableError,
  type AllStreamSubscription,
  type RecordedEvent as ClientRecordedEvent,
} from '@eventstore/db-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEsdbServer, type EsdbServer } from '../esdb-server/esdb-server.ts';
import type { EventData } from '../../src/store/event-store.ts';
import { EventStoreDbEventStore, type EventStoreDbClient } from '../../src/store/eventstoredb-event-store.ts';
import { toConnectionString } from '../../src/store/eventstoredb-mapping.ts';
import { eventStoreConformance } from '../store/conformance.ts';
import { take } from '../fixtures/subscription-take.ts';

let testServer: EsdbServer | undefined;
/** The server under test: a real one when BERTH_EVENTSTORE_URL is set, the test server otherwise. */
async function serverUrl(): Promise<string> {
  if (process.env.BERTH_EVENTSTORE_URL) return process.env.BERTH_EVENTSTORE_URL;
  testServer ??= await startEsdbServer();
  return testServer.url();
}
afterAll(async () => {
  await testServer?.close();
});

const serverName = process.env.BERTH_EVENTSTORE_URL ? 'eventstoredb' : 'eventstoredb over the test server';
eventStoreConformance(serverName, async () => EventStoreDbEventStore.connect(await serverUrl()));

const run = randomUUID().slice(0, 8);
const event = (i: number): EventData => ({ id: randomUUID(), type: 't.adapter', data: { i } });
const ids = (events: { id: string }[]) => events.map((e) => e.id);

/** A real client whose calls a test may intercept: the fault injection point for what a server cannot be made to do. */
function interceptable(real: EventStoreDBClient): EventStoreDbClient {
  return {
    appendToStream: (stream, events, options) => real.appendToStream(stream, events, options),
    readStream: (stream, options) => real.readStream(stream, options),
    readAll: (options) => real.readAll(options),
    subscribeToAll: (options) => real.subscribeToAll(options),
    setStreamMetadata: (stream, metadata, options) => real.setStreamMetadata(stream, metadata, options),
    deleteStream: (stream, options) => real.deleteStream(stream, options),
    dispose: () => real.dispose(),
  };
}

describe('EventStoreDB adapter against a server', () => {
  let real: EventStoreDBClient;
  let client: EventStoreDbClient;
  let store: EventStoreDbEventStore;

  beforeAll(async () => {
    real = EventStoreDBClient.connectionString(toConnectionString(await serverUrl()));
    client = interceptable(real);
    store = new EventStoreDbEventStore(client, { retry: { attempts: 3, baseDelayMs: 20 }, resubscribe: { baseDelayMs: 20 } });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('should expose each event at its commit position, equal to its prepare position and strictly increasing', async () => {
    const stream = `pos${run}-1`;
    const written = [event(0), event(1), event(2)];
    const result = await store.append(stream, written, { expectedRevision: 'no_stream' });
    const raw: ClientRecordedEvent[] = [];
    for await (const r of real.readStream(stream)) raw.push(r.event!);
    for (const r of raw) expect(r.position?.commit).toBe(r.position?.prepare);
    const read = await store.readStream(stream);
    expect(read.map((e) => e.position)).toEqual(raw.map((r) => r.position!.commit));
    for (let i = 1; i < read.length; i++) expect(read[i].position).toBeGreaterThan(read[i - 1].position);
    expect(result.position).toBe(read[2].position);
    // {p, p} resumes $all exactly there: the server's read includes p, the port's excludes it.
    const after = await store.readAll({ fromPosition: read[0].position, maxCount: 2 });
    expect(ids(after)).toEqual(ids(written.slice(1)));
  });

  it('should write a retried append once when the first attempt was stored but its answer was lost', async () => {
    const stream = `retry${run}-1`;
    // Fault injection: the server stores the append, then the test drops its answer the way a deadline would.
    let answersToLose = 1;
    client.appendToStream = async (s, events, options) => {
      const result = await real.appendToStream(s, events, options);
      if (answersToLose-- > 0) throw new DeadlineExceededError();
      return result;
    };
    try {
      const first = [event(0), event(1)];
      expect((await store.append(stream, first, { expectedRevision: 'no_stream' })).nextRevision).toBe(1n);
      answersToLose = 1;
      const second = [event(2)];
      expect((await store.append(stream, second, { expectedRevision: 1n })).nextRevision).toBe(2n);
      expect(ids(await store.readStream(stream))).toEqual(ids([...first, ...second]));
    } finally {
      client.appendToStream = (s, events, options) => real.appendToStream(s, events, options);
    }
  });

  it('should resubscribe after the client subscription fails, from the last delivered event', async () => {
    const stream = `drop${run}-1`;
    const opened: AllStreamSubscription[] = [];
    client.subscribeToAll = (options) => {
      const sub = real.subscribeToAll(options);
      opened.push(sub);
      return sub;
    };
    try {
      const head = await store.headPosition();
      const written = Array.from({ length: 8 }, (_, i) => event(i));
      await store.append(stream, written.slice(0, 6), { expectedRevision: 'no_stream' });
      const sub = store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [stream] } });
      try {
        const got = await take(sub, 2);
        // A real drop cannot be produced on demand: the test emits on the real subscription stream the error the
        // client emits there when its gRPC call fails.
        opened[0].emit('error', new UnavailableError(undefined, 'injected drop'));
        await store.append(stream, written.slice(6), { expectedRevision: 5n });
        got.push(...(await take(sub, 6)));
        expect(ids(got)).toEqual(ids(written));
        expect(opened).toHaveLength(2);
      } finally {
        await sub.close();
      }
    } finally {
      client.subscribeToAll = (options) => real.subscribeToAll(options);
    }
  });
});
