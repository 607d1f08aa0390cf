/**
 * The EventStoreDB adapter under the faults a cluster produces, injected by the test server (test/esdb-server): an
 * append whose answer is lost after it landed, a read and a subscription cut mid-way, deadlines, a leader change and
 * an unknown error. Each shows what the adapter does: no duplicate event, no lost effect, or a typed error.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import type { EventData } from '../../src/store/event-store.ts';
import { EventStoreDbEventStore } from '../../src/store/eventstoredb-event-store.ts';
import { startEsdbServer, type EsdbServer } from '../esdb-server/esdb-server.ts';
import { rejection, take } from '../fixtures/subscription-take.ts';

const event = (i: number): EventData => ({ id: randomUUID(), type: 't.fault', data: { i } });
const ids = (events: { id: string }[]) => events.map((e) => e.id);
let counter = 0;
const stream = () => `fault-${++counter}`;

describe('EventStoreDB adapter under injected faults', () => {
  let server: EsdbServer;
  let store: EventStoreDbEventStore;

  beforeAll(async () => {
    server = await startEsdbServer();
    store = await EventStoreDbEventStore.connect(server.url(), { retry: { baseDelayMs: 20 }, resubscribe: { baseDelayMs: 20 } });
  });
  afterEach(() => {
    expect(server.faults.pending, 'every armed fault was injected').toBe(0);
  });
  afterAll(async () => {
    await store?.close();
    await server?.close();
  });

  it('should write an append once when its answer is lost after it landed, and answer with its result', async () => {
    const s = stream();
    await store.append(s, [event(0)], { expectedRevision: 'no_stream' });
    server.faults.arm({ op: 'append', kind: 'lose-answer' });
    const written = [event(1), event(2)];
    const result = await store.append(s, written, { expectedRevision: 0n });
    const stored = await store.readStream(s);
    expect(ids(stored).slice(1)).toEqual(ids(written));
    expect(result).toEqual({ nextRevision: 2n, position: stored[2].position });
  });

  it('should report an unknown outcome for an append with any, and find it written once when the caller repeats it', async () => {
    const s = stream();
    const written = [event(0)];
    server.faults.arm({ op: 'append', kind: 'lose-answer' });
    const e = await rejection(store.append(s, written, { expectedRevision: 'any' }));
    expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
    expect((e as { detail: object }).detail).toMatchObject({ stream: s, outcome: 'unknown' });
    // The server remembers recent ids (the bounded cache of IndexWriter), so the repeat is recognised.
    await store.append(s, written, { expectedRevision: 'any' });
    expect(ids(await store.readStream(s))).toEqual(ids(written));
  });

  it('should retry an append answered with a timeout after it landed, and write it once', async () => {
    const s = stream();
    server.faults.arm({ op: 'append', kind: 'timeout' });
    const written = [event(0), event(1)];
    const result = await store.append(s, written, { expectedRevision: 'no_stream' });
    expect(result.nextRevision).toBe(1n);
    expect(ids(await store.readStream(s))).toEqual(ids(written));
  });

  it('should retry an append the server answers with a timeout at its deadline, and write it once', async () => {
    // A store whose own deadline is later than the server's write timeout, so the server's answer comes first.
    const patient = await EventStoreDbEventStore.connect(server.url(), { retry: { baseDelayMs: 20 }, timeoutMs: 5_000 });
    try {
      const s = stream();
      server.faults.arm({ op: 'append', kind: 'hang' });
      const written = [event(0)];
      const started = performance.now();
      expect((await patient.append(s, written, { expectedRevision: 'no_stream' })).nextRevision).toBe(0n);
      expect(performance.now() - started).toBeLessThan(5_000); // answered by the server, not ended by the store
      expect(ids(await patient.readStream(s))).toEqual(ids(written));
    } finally {
      await patient.close();
    }
  });

  it('should give up on a read the server never answers after its own deadline, then read it again', async () => {
    const s = stream();
    const written = [event(0), event(1)];
    await store.append(s, written, { expectedRevision: 'no_stream' });
    const impatient = await EventStoreDbEventStore.connect(server.url(), { retry: { baseDelayMs: 20 }, timeoutMs: 1_000 });
    try {
      server.faults.arm({ op: 'read', kind: 'hang' });
      const started = performance.now();
      expect(ids(await impatient.readStream(s))).toEqual(ids(written));
      expect(performance.now() - started).toBeGreaterThanOrEqual(1_000);
    } finally {
      await impatient.close();
    }
  });

  it('should read $all in full when the connection drops mid-read, with no event twice', async () => {
    const s = stream();
    const head = await store.headPosition();
    const written = Array.from({ length: 40 }, (_, i) => event(i));
    await store.append(s, written, { expectedRevision: 'no_stream' });
    const acceptedBefore = server.accepted;
    server.faults.arm({ op: 'read', kind: 'drop', events: 10 });
    const read = await store.readAll({ fromPosition: head });
    expect(ids(read.filter((e) => e.stream === s))).toEqual(ids(written));
    expect(server.accepted).toBeGreaterThan(acceptedBefore); // the client did reconnect
  });

  it('should resubscribe after the connection drops mid-subscription, with no gap and no duplicate', async () => {
    const s = stream();
    const head = await store.headPosition();
    const written = Array.from({ length: 20 }, (_, i) => event(i));
    await store.append(s, written.slice(0, 12), { expectedRevision: 'no_stream' });
    server.faults.arm({ op: 'subscribe', kind: 'drop', events: 8 });
    const sub = store.subscribeToAll({ fromPosition: head, filter: { streamPrefixes: [s] } });
    try {
      const got = await take(sub, 10);
      await store.append(s, written.slice(12), { expectedRevision: 11n });
      got.push(...(await take(sub, 10)));
      expect(ids(got)).toEqual(ids(written));
    } finally {
      await sub.close();
    }
  });

  it('should fail an append with a typed error, without retrying it, when the server answers Unknown', async () => {
    const s = stream();
    const written = [event(0)];
    server.faults.arm({ op: 'append', kind: 'unknown' });
    const e = await rejection(store.append(s, written, { expectedRevision: 'no_stream' }));
    // A retry would have landed (the fault is armed once): the failure itself shows there was none.
    expect(isBerthError(e, 'internal'), String(e)).toBe(true);
    expect(await store.streamRevision(s)).toBe('no_stream');
    await store.append(s, written, { expectedRevision: 'no_stream' });
    expect(ids(await store.readStream(s))).toEqual(ids(written));
  });

  it('should fail a read with a typed error when it ends with an unknown status', async () => {
    const s = stream();
    await store.append(s, [event(0)], { expectedRevision: 'no_stream' });
    server.faults.arm({ op: 'read', kind: 'unknown' });
    const e = await rejection(store.readStream(s));
    expect(isBerthError(e, 'internal'), String(e)).toBe(true);
  });
});

describe('EventStoreDB adapter across a leader change', () => {
  let first: EsdbServer;
  let second: EsdbServer;
  let store: EventStoreDbEventStore;

  beforeAll(async () => {
    first = await startEsdbServer();
    second = await startEsdbServer({ log: first.log, role: { kind: 'follower', leader: { host: 'localhost', port: first.port } } });
    store = await EventStoreDbEventStore.connect(first.url(), { retry: { baseDelayMs: 20 } });
  });
  afterAll(async () => {
    await store?.close();
    await first?.close();
    await second?.close();
  });

  it('should follow NotLeader to the new leader and write the append there once', async () => {
    const s = `leader-${randomUUID()}`;
    await store.append(s, [event(0)], { expectedRevision: 'no_stream' });
    // The election: the first node steps down and names the second as leader.
    second.node.role = { kind: 'leader' };
    first.node.role = { kind: 'follower', leader: { host: 'localhost', port: second.port } };
    const acceptedBefore = second.accepted;
    const written = [event(1)];
    const result = await store.append(s, written, { expectedRevision: 0n });
    expect(result.nextRevision).toBe(1n);
    expect(second.accepted).toBeGreaterThan(acceptedBefore);
    const stored = await store.readStream(s);
    expect(stored.map((e) => e.revision)).toEqual([0n, 1n]);
    expect(stored[1].id).toBe(written[0].id);
  });
});
