/**
 * The EventStoreDB adapter's cost over the protocol: sequential appends and a $all catch-up through the adapter,
 * against the raw @eventstore/db-client doing the same calls, both over the same test server (test/esdb-server) in a
 * process of its own, measured in this run. The ratio says what the adapter adds to what the protocol costs.
 */
import { randomUUID } from 'node:crypto';
import { EventStoreDBClient, excludeSystemEvents, jsonEvent, START } from '@eventstore/db-client';
import { EventStoreDbEventStore } from '../src/store/eventstoredb-event-store.ts';
import { spawnEsdbServer } from '../test/esdb-server/esdb-process.ts';
import { figure, median } from './figure.ts';

const APPENDS = Number(process.env.BENCH_APPENDS ?? 300);
const CATCH_UP = Number(process.env.BENCH_CATCH_UP ?? 5_000);
/** The two sides alternate over several rounds and each keeps its median (the machine is shared). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);

const payload = { command: ['sh', '-c', 'echo hello'], cwd: '/workspace', env: { A: '1' }, digest: 'sha256:' + '0'.repeat(64) };
const metadata = { runtimeId: 'bench', epoch: 1, correlationId: randomUUID(), actorType: 'execution' };
const newEvent = () => ({ id: randomUUID(), type: 'execution.accepted', data: payload, metadata });
const perSecond = (count: number, startNs: bigint) => count / (Number(process.hrtime.bigint() - startNs) / 1e9);

const server = await spawnEsdbServer();
const store = await EventStoreDbEventStore.connect(server.url);
const raw = EventStoreDBClient.connectionString(server.url);

/** One stream, appended event by event at its exact revision, as the actor runtime appends. */
async function adapterAppends(): Promise<number> {
  const stream = `bench-adapter-${randomUUID()}`;
  const start = process.hrtime.bigint();
  for (let i = 0; i < APPENDS; i++) {
    await store.append(stream, [newEvent()], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
  }
  return perSecond(APPENDS, start);
}

async function rawAppends(): Promise<number> {
  const stream = `bench-raw-${randomUUID()}`;
  const start = process.hrtime.bigint();
  for (let i = 0; i < APPENDS; i++) {
    await raw.appendToStream(stream, [jsonEvent(newEvent())], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
  }
  return perSecond(APPENDS, start);
}

/** Berth's events in $all, with the server's system events between them: CATCH_UP of them, in batches. */
async function fill(): Promise<void> {
  const stream = `bench-fill-${randomUUID()}`;
  for (let i = 0; i < CATCH_UP; i += 100) {
    const batch = Array.from({ length: Math.min(100, CATCH_UP - i) }, newEvent);
    await store.append(stream, batch, { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
  }
}

async function adapterCatchUp(): Promise<number> {
  const start = process.hrtime.bigint();
  const sub = store.subscribeToAll();
  let seen = 0;
  for await (const _ of sub) if (++seen >= CATCH_UP) break;
  await sub.close();
  return perSecond(seen, start);
}

async function rawCatchUp(): Promise<number> {
  const start = process.hrtime.bigint();
  const sub = raw.subscribeToAll({ fromPosition: START, filter: excludeSystemEvents() });
  let seen = 0;
  for await (const resolved of sub) {
    if (resolved.event && ++seen >= CATCH_UP) break;
  }
  await sub.unsubscribe();
  return perSecond(seen, start);
}

try {
  const appends = { adapter: [] as number[], raw: [] as number[] };
  const catchUps = { adapter: [] as number[], raw: [] as number[] };
  await rawAppends(); // warm both paths (connection, server features, JIT)
  await adapterAppends();
  for (let round = 0; round < ROUNDS; round++) {
    appends.raw.push(await rawAppends());
    appends.adapter.push(await adapterAppends());
  }
  await fill();
  await rawCatchUp();
  for (let round = 0; round < ROUNDS; round++) {
    catchUps.raw.push(await rawCatchUp());
    catchUps.adapter.push(await adapterCatchUp());
  }
  console.error(`appends/s adapter ${appends.adapter.map(Math.round).join(' ')} raw ${appends.raw.map(Math.round).join(' ')}`);
  console.error(`catch-up events/s adapter ${catchUps.adapter.map(Math.round).join(' ')} raw ${catchUps.raw.map(Math.round).join(' ')}`);
  figure('eventstoredb-appends', median(appends.adapter), 'appends/s', median(appends.raw), { op: '>=', ratio: 0.8 });
  figure('eventstoredb-catch-up', median(catchUps.adapter), 'events/s', median(catchUps.raw), { op: '>=', ratio: 0.8 });
} finally {
  await store.close();
  await raw.dispose();
  await server.stop();
}
