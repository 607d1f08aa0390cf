/**
 * One SQLite store file shared by real OS processes (test/fixtures/store-process.ts), as two runtimes on one host
 * share it with `--store sqlite:PATH`: optimistic concurrency decides between processes exactly as within one, a
 * retried append is recognised whoever retries it, `$all` reads are strictly increasing and gap-free in each
 * process, one process's live subscription sees the other's appends promptly, and a compaction by one never shows
 * the other a partial stream.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../integration/cli-process.ts';
import { waitFor } from '../fixtures/wait-for.ts';

interface StoreProcess {
  child: ChildProcess;
  call<T = any>(op: string, args?: Record<string, unknown>): Promise<T>;
  /** The live events its subscription printed so far (streams named live-…). */
  seen: { stream: string; position: string; data: { at: number }; at: number }[];
}

let dir: string;
let file: string;
let a: StoreProcess;
let b: StoreProcess;

async function storeProcess(name: string): Promise<StoreProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'test/fixtures/store-process.ts'), file, name], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  const seen: StoreProcess['seen'] = [];
  let ready!: () => void;
  const started = new Promise<void>((r) => (ready = r));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const message = JSON.parse(line);
    if (message.ready) return ready();
    if (message.seen) return void seen.push(message.seen);
    const waiter = pending.get(message.id)!;
    pending.delete(message.id);
    if (message.ok) waiter.resolve(message.result);
    else waiter.reject(Object.assign(new Error(`${name}: ${message.error.message}`), { code: message.error.code }));
  });
  child.on('exit', (code) => {
    for (const w of pending.values()) w.reject(new Error(`${name} exited (${code})`));
  });
  await started;
  let next = 0;
  return {
    child,
    seen,
    call(op, args = {}) {
      const id = ++next;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
      });
    },
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-store-processes-'));
  file = join(dir, 'events.sqlite3');
  [a, b] = await Promise.all([storeProcess('a'), storeProcess('b')]);
  // Both follow $all from the start, through everything the tests below do.
  await Promise.all([a.call('subscribe', { from: 'start' }), b.call('subscribe', { from: 'start' })]);
});
afterAll(async () => {
  for (const p of [a, b]) {
    if (!p) continue;
    p.child.stdin!.end();
    await new Promise((r) => setTimeout(r, 200));
    p.child.kill('SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A sorted list of positions (decimal strings) is 1, 2, 3, … up to its length. */
const gapFreeFromOne = (positions: string[]) => positions.every((p, i) => BigInt(p) === BigInt(i + 1));

describe('one SQLite store file, two processes', () => {
  it('should let exactly one process win each revision of one stream; every loser gets WrongExpectedVersion', { timeout: 120_000 }, async () => {
    const stream = `race-${randomUUID()}`;
    const until = 300;
    const [ra, rb] = await Promise.all([a.call('race', { stream, until, writers: 4 }), b.call('race', { stream, until, writers: 4 })]);
    const wins = [...ra.wins, ...rb.wins];
    // Each revision was won once, and the stream holds exactly the winners' events.
    expect(wins.map((w: { revision: string }) => Number(w.revision)).sort((x: number, y: number) => x - y)).toEqual(
      Array.from({ length: until }, (_, i) => i),
    );
    const stored = await a.call<{ id: string; revision: string }[]>('readStream', { stream });
    const byRevision = new Map(wins.map((w: { revision: string; id: string }) => [w.revision, w.id]));
    expect(stored.map((e) => byRevision.get(e.revision))).toEqual(stored.map((e) => e.id));
    // Every loss names a revision past the expected one, and some append lost its revision to the other process's
    // (they really raced). How many each wins is scheduling's business: on a loaded machine one may win them all.
    const losses = [...ra.losses, ...rb.losses];
    for (const l of losses) expect(l.expected === 'no_stream' ? l.actual !== 'no_stream' : BigInt(l.actual) > BigInt(l.expected)).toBe(true);
    const by = (tag: 'a' | 'b') => (w: { revision: string }): [string, 'a' | 'b'] => [w.revision, tag];
    const winner = new Map([...ra.wins.map(by('a')), ...rb.wins.map(by('b'))]);
    const lostTo = (l: { expected: string }) => winner.get(l.expected === 'no_stream' ? '0' : String(BigInt(l.expected) + 1n));
    const lostToTheOther = [...ra.losses.filter((l: { expected: string }) => lostTo(l) === 'b'), ...rb.losses.filter((l: { expected: string }) => lostTo(l) === 'a')];
    expect(lostToTheOther.length).toBeGreaterThan(0);
  });

  it('should create each stream once when both append with no_stream at once', async () => {
    const prefix = `fresh-${randomUUID()}`;
    const count = 200;
    const [fa, fb] = await Promise.all([a.call('fresh', { prefix, count }), b.call('fresh', { prefix, count })]);
    for (let k = 0; k < count; k++) {
      const outcomes = [fa[k], fb[k]];
      expect(outcomes.filter((o) => o.won)).toHaveLength(1);
      expect(outcomes.find((o) => !o.won)).toMatchObject({ actual: '0' });
    }
    // Which process wins how many depends on scheduling (on a loaded machine one may win them all); that each
    // stream has one winner and one WrongExpectedVersion is what holds.
  });

  it('should take a re-append of the same event ids by the other process as the same append', async () => {
    for (const expected of ['no_stream', 'any']) {
      const stream = `idem-${randomUUID()}`;
      const events = [0, 1, 2].map(() => ({ id: randomUUID(), type: 'idem', data: {} }));
      const [first, second] = await Promise.all([a.call('append', { stream, events, expected }), b.call('append', { stream, events, expected })]);
      expect(second).toEqual(first);
      const again = await b.call('append', { stream, events, expected });
      expect(again).toEqual(first);
      expect((await a.call<{ id: string }[]>('readStream', { stream })).map((e) => e.id)).toEqual(events.map((e) => e.id));
    }
    // The same ids one revision further on are a conflict, not a second copy.
    const stream = `idem-${randomUUID()}`;
    const events = [{ id: randomUUID(), type: 'idem', data: {} }];
    await a.call('append', { stream, events, expected: 'no_stream' });
    await expect(b.call('append', { stream, events: [{ id: randomUUID(), type: 'idem', data: {} }, ...events], expected: '0' })).rejects.toMatchObject({
      code: 'wrong_expected_version',
    });
    expect(await a.call('readStream', { stream })).toHaveLength(1);
  });

  it("should show each process $all strictly increasing and gap-free, reads and subscriptions alike", { timeout: 60_000 }, async () => {
    const head = await a.call<string>('head');
    const [allA, allB] = await Promise.all([a.call<string[]>('readAll'), b.call<string[]>('readAll')]);
    expect(allA).toEqual(allB);
    expect(allA.at(-1)).toBe(head);
    expect(gapFreeFromOne(allA)).toBe(true);
    // The subscriptions followed every append as it happened, both processes', in the same order.
    for (const p of [a, b]) {
      const seen = await waitFor(() => p.call<string[]>('subscribed'), { what: 'the subscription to catch up', until: (s) => s.length >= allA.length });
      expect(seen.slice(0, allA.length)).toEqual(allA);
    }
  });

  it("should wake one process's live subscription with the other's appends within a poll or two", { timeout: 60_000 }, async () => {
    const stream = `live-${randomUUID()}`;
    for (let i = 0; i < 20; i++) {
      await b.call('appendStamped', { stream });
      await new Promise((r) => setTimeout(r, 20));
    }
    const seen = await waitFor(() => a.seen.filter((s) => s.stream === stream), { what: "b's live appends in a", until: (s) => s.length === 20 });
    const latencies = seen.map((s) => s.at - s.data.at).sort((x, y) => x - y);
    // The poll runs every 50 ms; a second is the bound on a loaded two-core machine.
    expect(latencies[latencies.length - 1]).toBeLessThan(1000);
  });

  it("should keep a SIGKILLed writer's batches whole or absent, and let the others write on", { timeout: 60_000 }, async () => {
    const prefix = `torn-${randomUUID()}`;
    const killed = await storeProcess('killed');
    void killed.call('batches', { prefix, size: 50 }).catch(() => undefined);
    await waitFor(() => a.call<number[]>('streamSizes', { prefix }), { what: 'some batches', until: (sizes) => sizes.length >= 20 });
    killed.child.kill('SIGKILL');
    await new Promise((r) => killed.child.once('exit', r));
    // The write lock the killed process may have held goes with it.
    await a.call('appendStamped', { stream: `after-kill-${randomUUID()}` });
    const sizes = await b.call<number[]>('streamSizes', { prefix });
    expect(new Set(sizes)).toEqual(new Set([50]));
    expect(gapFreeFromOne(await b.call<string[]>('readAll'))).toBe(true);
  });

  it('should never show a partial stream to one process while the other compacts it', { timeout: 60_000 }, async () => {
    const stream = `compact-${randomUUID()}`;
    const events = Array.from({ length: 200 }, () => ({ id: randomUUID(), type: 'step', data: {} }));
    await a.call('append', { stream, events, expected: 'no_stream' });
    const reading = b.call<{ reads: number; shapes: string[] }>('readLoop', { stream, ms: 1500 });
    await new Promise((r) => setTimeout(r, 300));
    await a.call('compact', { stream, expected: '199' });
    const { reads, shapes } = await reading;
    expect(reads).toBeGreaterThan(10);
    // Whole before, the summary alone after: nothing in between.
    expect(shapes).toEqual(['0..199 x200', '200..200 x1']);
    // Both subscriptions go on past the compaction, still in increasing order.
    const tail = await b.call('appendStamped', { stream: `live-${randomUUID()}` });
    for (const p of [a, b]) {
      const seen = await waitFor(() => p.call<string[]>('subscribed'), { what: 'the append after the compaction', until: (s) => s.includes(tail.position) });
      expect(seen.every((pos, i) => i === 0 || BigInt(pos) > BigInt(seen[i - 1]))).toBe(true);
    }
  });
});
