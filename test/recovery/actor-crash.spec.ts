/**
 * Crash recovery of the actor runtime with real processes: a child runs op actors (persist intent, then an effect
 * that writes the op id to a file once) and is SIGKILLed at random moments, including between an intent's append and
 * its effect, and during recovery itself. After 50+ kills and a final clean recovery, nothing ran twice, every intent
 * ended completed or reconciled, and no stream has a gap.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayStream } from '../../src/actors/replay.ts';
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { opActor } from '../fixtures/actors/op.actor.ts';

const KILLS = 52;
const child = join(import.meta.dirname, '../fixtures/actors/op-crash-child.ts');

let dir: string;
let env: Record<string, string>;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-actor-crash-'));
  mkdirSync(join(dir, 'receipts'));
  writeFileSync(join(dir, 'ops'), '');
  writeFileSync(join(dir, 'attempts'), '');
  env = {
    OP_DB: join(dir, 'events.sqlite3'),
    OP_FILE: join(dir, 'ops'),
    OP_ATTEMPTS_FILE: join(dir, 'attempts'),
    OP_RECEIPTS_DIR: join(dir, 'receipts'),
  };
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  ready: Promise<{ epoch: number; report: { actors: number; recovered: number } } | undefined>;
  exit: Promise<number | null>;
  kill(): void;
  stderr(): string;
}

function runChild(extra: Record<string, string>): Run {
  const p = spawn(process.execPath, ['--import', 'tsx', child], {
    env: { ...process.env, ...env, ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  p.stderr.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
  const exit = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
  const ready = new Promise<Awaited<Run['ready']>>((resolve) => {
    p.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line));
    });
    void exit.then(() => resolve(undefined));
  });
  return { ready, exit, kill: () => p.kill('SIGKILL'), stderr: () => err };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);
const duplicates = (xs: string[]) => xs.filter((x, i) => xs.indexOf(x) !== i);

describe('actor runtime under SIGKILL', () => {
  it('never repeats an effect, reconciles every intent and leaves no gap', { timeout: 150_000 }, async () => {
    let recoveredAtStart = 0;
    for (let i = 0; i < KILLS; i++) {
      const run = runChild({ OP_STALL_MS: String([0, 5, 40][i % 3]) });
      if (i % 4 === 3) {
        // Kill while it may still be starting or recovering.
        await sleep(Math.random() * 700);
      } else {
        const ready = await run.ready;
        if (!ready) throw new Error(`child exited early:\n${run.stderr()}`);
        recoveredAtStart += ready.report.recovered;
        await sleep(20 + Math.random() * 200);
      }
      run.kill();
      await run.exit;
    }

    const final = runChild({ OP_MODE: 'final', OP_STALL_MS: '0' });
    const ready = await final.ready;
    expect(await final.exit, final.stderr()).toBe(0);
    recoveredAtStart += ready?.report.recovered ?? 0;

    const store = SqliteEventStore.open(env.OP_DB);
    const all = await store.readAll();
    await store.close();

    const streams = new Map<string, RecordedEvent[]>();
    for (const e of all) streams.set(e.stream, [...(streams.get(e.stream) ?? []), e]);
    for (const [stream, events] of streams) {
      expect(events.map((e) => e.revision), stream).toEqual(events.map((_, i) => BigInt(i)));
    }

    const finals = new Map<string, string>();
    let reconciled = 0;
    for (const [stream, events] of streams) {
      if (!stream.startsWith('op-')) continue;
      const steps = replayStream(opActor, events);
      const end = String(steps[steps.length - 1].stateAfter);
      finals.set(stream.slice(3), end);
      if (events.some((e) => e.type === 'runtime.recovered')) reconciled++;
      else {
        // Not reconciled: then it completed through its own effect, caused by its intent.
        const last = events[events.length - 1];
        expect(last.type, stream).toBe('op.completed');
        expect(last.data, stream).toEqual({ evidence: 'effect' });
        expect(last.metadata.causationId, stream).toBe(events[0].id);
      }
    }
    const written = lines(env.OP_FILE);
    const attempts = lines(env.OP_ATTEMPTS_FILE);
    const states = [...finals.values()];
    const summary = {
      ops: finals.size,
      done: states.filter((s) => s === 'done').length,
      unknown: states.filter((s) => s === 'unknown').length,
      reconciled,
      recoveredAtStart,
      written: written.length,
    };
    console.log(`actor-crash: ${JSON.stringify(summary)}`);

    expect(duplicates(written)).toEqual([]);
    // Stronger than the file: the effect itself was never started twice for one intent.
    expect(duplicates(attempts)).toEqual([]);
    expect(states.filter((s) => s !== 'done' && s !== 'unknown')).toEqual([]);
    for (const opId of written) expect(finals.get(opId), opId).toBe('done');
    for (const [opId, state] of finals) if (state === 'done') expect(written, opId).toContain(opId);
    // The kills landed inside the windows that matter: intents persisted whose effect never finished.
    expect(reconciled).toBeGreaterThan(0);
    expect(summary.unknown + summary.done).toBe(summary.ops);
  });
});
