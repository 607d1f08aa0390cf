/**
 * A member's audit feed read from the start over another tenant's history (DESIGN §13: a member may not exhaust the
 * server): the feed tells each event's scope by its stream, and it looked each stream up by loading its actor (a
 * read and a fold of the stream), so one `GET /v1/events?until=head` of a member over a store of a million executions
 * took 565 s of the server's CPU and returned nothing. The feed now learns a stream's scope from the stream's first
 * event, which names it (a creation; an allocation's names its environment), so a feed from the start loads no actor
 * for streams it saw begin; it still loads one for a stream begun before where it started (after=). And since each
 * such listing reads the whole log, a tenant's listings take turns at the store's reads in one lane per scope: 16 of
 * them at once read no faster than one, and another tenant's listing is not slowed by them.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { alice, createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';

/** The admin's environments: streams of another scope the member's feed reads past. */
const OTHERS = 300;

let gw: RunningGateway;
beforeAll(async () => {
  gw = await startGateway();
});
afterAll(() => gw?.close());

/** The whole of a listing, with how many actors the runtime looked at while it was read. */
async function listing(token: string, query = 'until=head'): Promise<{ text: string; actorGets: number }> {
  const actors = gw.berth.runtime.actors;
  const get = actors.get;
  let actorGets = 0;
  actors.get = ((...args: Parameters<typeof get>) => (actorGets++, get.apply(actors, args))) as typeof get;
  try {
    const response = await fetch(`${gw.url}/v1/events?${query}`, { headers: gw.headers(token) });
    expect(response.status).toBe(200);
    return { text: await response.text(), actorGets };
  } finally {
    actors.get = get;
  }
}

it("reads past another tenant's history from the start without loading its actors, and shows only the member's own", { timeout: 120_000 }, async () => {
  const others: string[] = [];
  for (let i = 0; i < OTHERS; i++) others.push(await createEnvironment(gw, tokens.admin, `admin env ${i}`));
  const own = await createEnvironment(gw, tokens.alice);
  const alice = await listing(tokens.alice);
  expect(alice.text).toContain(own);
  for (const id of others) expect(alice.text).not.toContain(id);
  // One actor load per stream of the store before; none now (every stream began after the feed's start).
  expect(alice.actorGets).toBeLessThan(10);

  // Begun before where a feed starts, a stream is still looked up, once: its later events are told apart all the same.
  const after = [...alice.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])).at(-1)!;
  await Promise.all([
    fetch(`${gw.url}/v1/environments/${others[0]}`, { method: 'PUT', headers: { ...gw.headers(tokens.admin), 'content-type': 'application/json' }, body: JSON.stringify({ description: 'changed' }) }),
    fetch(`${gw.url}/v1/environments/${own}`, { method: 'PUT', headers: { ...gw.headers(tokens.alice), 'content-type': 'application/json' }, body: JSON.stringify({ description: 'mine changed' }) }),
  ]).then((answers) => answers.forEach((a) => expect(a.status).toBe(200)));
  const later = await listing(tokens.alice, `until=head&after=${after}`);
  expect(later.text).toContain('mine changed');
  expect(later.text).not.toContain(others[0]!);

  // A listing whose last event is a later one of a stream known to be another scope's still ends at its head.
  const put = await fetch(`${gw.url}/v1/environments/${others[1]}`, { method: 'PUT', headers: { ...gw.headers(tokens.admin), 'content-type': 'application/json' }, body: JSON.stringify({ description: 'last' }) });
  expect(put.status).toBe(200);
  expect((await listing(tokens.alice)).text).not.toContain('"last"');
});

it("never shows a snapshot, not even as the last event of an every-scope listing", async () => {
  await gw.berth.runtime.store.append('snapshot-feed-scan', [{ id: crypto.randomUUID(), type: 'snapshot.taken', data: { mark: 'SNAPSHOT-LAST' } }], { expectedRevision: 'any' });
  const streams: string[] = [];
  for await (const e of gw.berth.api.events({ role: 'admin', scope: '*' }, 'start', { untilHead: true })) streams.push(e.stream);
  expect(streams.length).toBeGreaterThan(OTHERS);
  expect(streams).not.toContain('snapshot-feed-scan');
});

it("a tenant's many listings take turns: another tenant's listing, started last, ends first", { timeout: 120_000 }, async () => {
  // 25,600 events of streams no actor owns: every member's listing reads them all and shows none.
  const store = gw.berth.runtime.store;
  for (let s = 0; s < 256; s++) {
    await store.append(`filler-${s}`, Array.from({ length: 100 }, (_, i) => ({ id: randomUUID(), type: 'filler.noted', data: { i } })), { expectedRevision: 'any' });
  }
  const bob: Caller = { scope: 'bob', role: 'member' };
  const ended: string[] = [];
  const list = async (caller: Caller, label: string) => {
    for await (const e of gw.berth.api.events(caller, 'start', { untilHead: true })) expect(e.stream.startsWith('filler-')).toBe(false);
    ended.push(label);
  };
  // Without lanes each listing read 8 pages a turn of the event loop, alice's 16 as fast as bob's one: hers, begun
  // first, ended first.
  await Promise.all([...Array.from({ length: 16 }, (_, i) => list(alice, `alice ${i}`)), list(bob, 'bob')]);
  expect(ended[0]).toBe('bob');
});
