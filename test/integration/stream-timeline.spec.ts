/**
 * The console's timeline pages against a full fold: every page of a real environment stream (with the runtime's own
 * snapshots every 50 events) shows the states and context diffs the whole stream's replay shows, a page reads the
 * events from the snapshot before it rather than from revision 0, and a snapshot of another machine is ignored. The
 * full replay, folded and answered a page at a time, is one fold of the stream.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readLatestSnapshot, writeSnapshot } from '../../src/actors/snapshot-stream.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { replayStream } from '../../src/actors/replay.ts';
import { DIFF_VALUE_MAX_CHARS, replayStoredPages, replayStoredStream, type ReplayedStep } from '../../src/runtime/core/stream-replay.ts';
import { actorTypeOfStream, actorTypes } from '../../src/runtime/registry.ts';
import { timelinePage } from '../../src/runtime/core/stream-timeline.ts';
import type { EventStore } from '../../src/store/event-store.ts';
import { admin, startTestBerth } from './environments-berth.ts';

const EVENTS = 230;
const LIMIT = 20;
/** The runtime's default snapshot interval. */
const SNAPSHOT_EVERY = 50;
const LAST_PAGE = Math.floor((EVENTS - 1) / LIMIT) * LIMIT;

let dir: string;
let berth: Berth;
let stream: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-timeline-'));
  berth = await startTestBerth(dir, { docker: false });
  const env = await berth.api.createEnvironment(admin, { name: 'long history' });
  for (let i = 1; i < EVENTS; i++) await berth.api.updateEnvironment(admin, env.id, { description: `revision ${i}` });
  stream = `environment-${env.id}`;
  await berth.runtime.actors.whenIdle();
}, 120_000);

afterAll(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The store, counting the events of `stream` each read returns. */
function counting(store: EventStore, counted: string): { store: EventStore; read: () => number } {
  let read = 0;
  const proxy = new Proxy(store, {
    get(target, key) {
      if (key !== 'readStream') return Reflect.get(target, key, target);
      return async (...args: Parameters<EventStore['readStream']>) => {
        const events = await target.readStream(...args);
        if (args[0] === counted) read += events.length;
        return events;
      };
    },
  });
  return { store: proxy, read: () => read };
}

const shown = (steps: ReplayedStep[]) => steps.map((s) => ({ revision: s.event.revision, before: s.stateBefore, after: s.stateAfter, diff: s.contextDiff }));

async function expectEveryPageFolded(store: EventStore): Promise<void> {
  const full = (await replayStoredStream(store, stream)).steps;
  expect(full).toHaveLength(EVENTS);
  for (let from = 0; from < EVENTS; from += LIMIT) {
    const page = await timelinePage(store, stream, { from, limit: LIMIT, failures: false });
    expect(shown(page.steps), `page from ${from}`).toEqual(shown(full.slice(from, from + LIMIT)));
    expect(page.next).toBe(from + LIMIT < EVENTS ? from + LIMIT : null);
  }
}

describe('the stream timeline', () => {
  it('should show at every page the states and context diffs of a full fold', async () => {
    expect(await readLatestSnapshot(berth.runtime.store, stream)).toBeDefined();
    await expectEveryPageFolded(berth.runtime.store);
  });

  it('should read a late page from the snapshot before it, not from the stream start', async () => {
    const { store, read } = counting(berth.runtime.store, stream);
    await timelinePage(store, stream, { from: LAST_PAGE, limit: LIMIT, failures: false });
    // The bounds (one event each way) and at most a snapshot interval's worth of events before the page.
    expect(read()).toBeLessThanOrEqual(2 + SNAPSHOT_EVERY + LIMIT);
  });

  it('should fold from the start past a snapshot another machine version took', async () => {
    // A snapshot of an early state, claimed by a machine that is not today's for the revision right before the last
    // page: used, it would put the wrong description before that page's first event.
    const early = (await berth.runtime.store.readStream(`snapshot-${stream}`, { from: 'start', maxCount: 1 }))[0];
    const latest = await readLatestSnapshot(berth.runtime.store, stream);
    const persisted = (early.data as { snapshot: NonNullable<typeof latest>['persisted'] }).snapshot;
    await writeSnapshot(berth.runtime.store, stream, { revision: BigInt(LAST_PAGE - 1), persisted, machine: 'not-this-machine' });
    await expectEveryPageFolded(berth.runtime.store);
  });

  it('should replay the whole stream a page at a time as one fold does, to any revision, reading each event once', async () => {
    const actorType = actorTypeOfStream(stream, actorTypes)!;
    const events = await berth.runtime.store.readStream(stream);
    const oneFold = replayStream(actorType, events, { maxValueChars: DIFF_VALUE_MAX_CHARS });
    for (const at of [undefined, 0, 6, 7, 8, 100, EVENTS - 1, EVENTS + 5]) {
      const { store, read } = counting(berth.runtime.store, stream);
      const { pages } = await replayStoredPages(store, stream, { pageEvents: 7, ...(at === undefined ? {} : { at: BigInt(at) }) });
      const sizes: number[] = [];
      const steps: ReplayedStep[] = [];
      for await (const page of pages) (sizes.push(page.length), steps.push(...page));
      const expected = at === undefined ? oneFold : oneFold.slice(0, at + 1);
      expect(shown(steps), `at ${at}`).toEqual(shown(expected));
      expect(sizes.every((n) => n <= 7)).toBe(true);
      expect(read()).toBeLessThanOrEqual(expected.length + 7);
    }
    await expect(replayStoredPages(berth.runtime.store, 'environment-henv_nothing')).rejects.toMatchObject({ code: 'not_found' });
  });
});
