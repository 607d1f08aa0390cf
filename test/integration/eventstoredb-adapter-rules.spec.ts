/**
 * The EventStoreDB adapter's rules that only a server shows, over the test server (test/esdb-server): an append's
 * position, one retry budget per append across adapter and actor runtime, reads that need the leader, what TLS and
 * credential options do, that close closes the connection, event-id case, and the unary append of older nodes.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { ActorRuntime } from '../../src/actors/actor-runtime.ts';
import { isWrongExpectedVersion, type EventData } from '../../src/store/event-store.ts';
import { EventStoreDbEventStore } from '../../src/store/eventstoredb-event-store.ts';
import { startEsdbServer, type EsdbServer } from '../esdb-server/esdb-server.ts';
import { selfSignedCert } from '../esdb-server/self-signed-cert.ts';
import { counterActor, type CounterServices } from '../fixtures/actors/counter.actor.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const event = (i: number): EventData => ({ id: randomUUID(), type: 't.rule', data: { i } });
const ids = (events: { id: string }[]) => events.map((e) => e.id);
const stream = () => `rule-${randomUUID().slice(0, 8)}`;

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    (v) => {
      throw new Error(`expected a failure, got ${String(v)}`);
    },
    (e: unknown) => e,
  );
}

describe('EventStoreDB adapter rules over the test server', () => {
  let server: EsdbServer;
  let store: EventStoreDbEventStore;

  beforeAll(async () => {
    server = await startEsdbServer();
    store = await EventStoreDbEventStore.connect(server.url(), { retry: { baseDelayMs: 20 } });
  });
  afterAll(async () => {
    await store?.close();
    await server?.close();
  });

  it("should answer an append, and its idempotent repeat, with its last event's position", async () => {
    const s = stream();
    await store.append(s, [event(0)], { expectedRevision: 'no_stream' });
    const written = [event(1), event(2), event(3)];
    const result = await store.append(s, written, { expectedRevision: 0n });
    const stored = await store.readStream(s);
    expect(result).toEqual({ nextRevision: 3n, position: stored[3].position });
    expect(stored[1].position).toBeLessThan(stored[3].position);
    // Every read-your-writes wait compares against this position: $all holds the last event exactly there.
    const [atPosition] = await store.readAll({ fromPosition: stored[2].position, maxCount: 1 });
    expect(atPosition.id).toBe(written[2].id);
    expect(await store.append(s, written, { expectedRevision: 0n })).toEqual(result);
  });

  it('should store an upper-case event id as lower case and recognise its repeat in either case', async () => {
    const s = stream();
    const id = randomUUID().toUpperCase();
    const first = await store.append(s, [{ id, type: 't.rule', data: {} }], { expectedRevision: 'no_stream' });
    const [stored] = await store.readStream(s);
    expect(stored.id).toBe(id.toLowerCase());
    expect(await store.append(s, [{ id: id.toLowerCase(), type: 't.rule', data: {} }], { expectedRevision: 'no_stream' })).toEqual(first);
    expect(await store.readStream(s)).toHaveLength(1);
  });

  it('should close its connection to the server on close', async () => {
    // A server of its own: grpc-js shares one connection between clients of the same target.
    const own = await startEsdbServer();
    try {
      const closing = await EventStoreDbEventStore.connect(own.url());
      expect(own.connections).toBe(1);
      await closing.close();
      await waitFor(() => own.connections, { what: 'the closed store to close its connection', until: (n) => n === 0 });
    } finally {
      await own.close();
    }
  });

  it('should spend one retry budget per append: the actor runtime reports an append the adapter already retried', async () => {
    const limited = await EventStoreDbEventStore.connect(server.url(), { retry: { attempts: 3, baseDelayMs: 20 }, timeoutMs: 1_000 });
    const runtime = new ActorRuntime<CounterServices>({ store: limited, runtimeId: `budget-${randomUUID()}`, services: { inspected: [] } });
    runtime.register(counterActor);
    await runtime.start();
    const counter = randomUUID();
    try {
      server.faults.arm(...Array.from({ length: 3 }, () => ({ op: 'append', kind: 'hang' }) as const));
      // A fourth attempt, by the runtime, would land: the failure shows there was none.
      const e = await rejection(runtime.send('counter', counter, { type: 'counter.incremented', by: 1 }));
      expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
      expect((e as { detail: object }).detail).toMatchObject({ outcome: 'unknown', retriesSpent: true });
      expect(server.faults.injected.filter((f) => f.kind === 'hang')).toHaveLength(3);
      // Nothing is lost: the caller's repeat lands once.
      const sent = await runtime.send('counter', counter, { type: 'counter.incremented', by: 1 });
      expect(sent.context.count).toBe(1);
    } finally {
      await limited.close();
    }
  });

  it('should refuse tlsVerifyCert=false, which the client ignores, and credentials over tls=false, which it drops', async () => {
    const ignored = await rejection(EventStoreDbEventStore.connect(`esdb://localhost:${server.port}?tls=true&tlsVerifyCert=false`));
    expect(isBerthError(ignored, 'invalid_request'), String(ignored)).toBe(true);
    expect(String(ignored)).toMatch(/tlsCAFile/);
    const dropped = await rejection(EventStoreDbEventStore.connect(`esdb://admin:changeit@localhost:${server.port}?tls=false`));
    expect(isBerthError(dropped, 'invalid_request'), String(dropped)).toBe(true);
    expect(JSON.stringify((dropped as { detail: object }).detail)).not.toContain('changeit');
  });
});

describe('EventStoreDB adapter over TLS', () => {
  const tls = selfSignedCert();
  let server: EsdbServer;

  beforeAll(async () => {
    server = await startEsdbServer({ tls });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('should connect with the node certificate as tlsCAFile and send the credentials of the URL', async () => {
    const url = server.url(tls.certFile).replace('esdb://', 'esdb://admin:changeit@');
    const store = await EventStoreDbEventStore.connect(url);
    try {
      const s = stream();
      await store.append(s, [event(0)], { expectedRevision: 'no_stream' });
      expect(await store.readStream(s)).toHaveLength(1);
      expect(server.node.authorizations).toContain(`Basic ${Buffer.from('admin:changeit').toString('base64')}`);
    } finally {
      await store.close();
    }
  });

  it('should fail with unavailable when the certificate is not trusted', async () => {
    const e = await rejection(EventStoreDbEventStore.connect(`esdb://localhost:${server.port}?tls=true`, { retry: { attempts: 1 } }));
    expect(isBerthError(e, 'unavailable'), String(e)).toBe(true);
  });
});

describe('EventStoreDB adapter reading through a lagging follower', () => {
  let leader: EsdbServer;
  let follower: EsdbServer;

  beforeAll(async () => {
    leader = await startEsdbServer();
    follower = await startEsdbServer({ log: leader.log, role: { kind: 'follower', leader: { host: 'localhost', port: leader.port } } });
  });
  afterAll(async () => {
    await follower?.close();
    await leader?.close();
  });

  it('should read the latest write from the leader, not a follower that has not replicated it', async () => {
    const writer = await EventStoreDbEventStore.connect(leader.url());
    const s = stream();
    const written = [event(0), event(1)];
    try {
      const first = await writer.append(s, written.slice(0, 1), { expectedRevision: 'no_stream' });
      await writer.append(s, written.slice(1), { expectedRevision: 0n });
      follower.node.role = { kind: 'follower', leader: { host: 'localhost', port: leader.port }, replicatedUpTo: first.position };
    } finally {
      await writer.close();
    }
    const reader = await EventStoreDbEventStore.connect(follower.url(), { retry: { baseDelayMs: 20 } });
    try {
      expect(ids(await reader.readStream(s))).toEqual(ids(written));
      expect(await reader.streamRevision(s)).toBe(1n);
    } finally {
      await reader.close();
    }
  });
});

describe('EventStoreDB adapter over a node without BatchAppend (the unary Append)', () => {
  let server: EsdbServer;
  let store: EventStoreDbEventStore;

  beforeAll(async () => {
    server = await startEsdbServer({ batchAppend: false });
    store = await EventStoreDbEventStore.connect(server.url());
  });
  afterAll(async () => {
    await store?.close();
    await server?.close();
  });

  it('should append, recognise a repeat, and report a conflict with the actual revision', async () => {
    const s = stream();
    const written = [event(0), event(1)];
    const result = await store.append(s, written, { expectedRevision: 'no_stream' });
    expect(await store.append(s, written, { expectedRevision: 'no_stream' })).toEqual(result);
    const e = await rejection(store.append(s, [event(2)], { expectedRevision: 'no_stream' }));
    expect(isWrongExpectedVersion(e), String(e)).toBe(true);
    expect((e as { actual: unknown }).actual).toBe(1n);
  });
});
