/**
 * `berth events` and `berth replay` as real processes over a real SQLite store: well-formed JSON lines with the fixed
 * fields of DESIGN §8, prefix filtering, live following, revision limits, deterministic replays, clear errors.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { profileSchema } from '../../schemas/profile.ts';
import { ActorRuntime } from '../../src/actors/actor-runtime.ts';
import { actorTypes } from '../../src/runtime/registry.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { berth, spawnBerth } from './cli-process.ts';

const eventFields = ['createdAt', 'data', 'id', 'metadata', 'position', 'revision', 'stream', 'type'];
const replayFields = [...eventFields, 'stateAfter', 'stateBefore'].sort();

let dir: string;
let store: SqliteEventStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-cli-log-'));
  store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const append = (stream: string, type: string, data: unknown) =>
  store.append(stream, [{ id: randomUUID(), type, data, metadata: { test: true } }], { expectedRevision: 'any' });

const jsonLines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));

describe('berth events', () => {
  it('should print one well-formed JSON object per event, in global order, filtered by stream prefix', async () => {
    await append('thing-1', 'thing.made', { n: 1 });
    await append('other-1', 'other.made', { n: 2 });
    await append('thing-1', 'thing.changed', { n: 3 });
    const all = await berth(['events', '--json', '--data-dir', dir]);
    expect(all.code).toBe(0);
    const events = jsonLines(all.stdout);
    expect(events.map((e) => e.type)).toEqual(['thing.made', 'other.made', 'thing.changed']);
    for (const e of events) expect(Object.keys(e).sort()).toEqual(eventFields);
    expect(events[2]).toMatchObject({ stream: 'thing-1', revision: 1, data: { n: 3 }, metadata: { test: true } });
    expect(events.map((e) => e.position)).toEqual([...events.map((e) => e.position)].sort((a, b) => a - b));

    const things = await berth(['events', '--json', '--prefix', 'thing-', '--data-dir', dir]);
    expect(jsonLines(things.stdout).map((e) => e.type)).toEqual(['thing.made', 'thing.changed']);

    const human = await berth(['events', '--data-dir', dir]);
    expect(human.stdout.trim().split('\n')).toHaveLength(3);
    expect(human.stdout).toContain('thing-1@1 thing.changed {"n":3}');
  });

  it('should follow new events live and stop on SIGTERM', async () => {
    await append('thing-1', 'thing.made', {});
    const follow = spawnBerth(['events', '--follow', '--json', '--data-dir', dir]);
    await follow.waitForLine(/thing\.made/);
    await append('thing-2', 'thing.live', { live: true });
    const line = await follow.waitForLine(/thing\.live/);
    expect(JSON.parse(line)).toMatchObject({ stream: 'thing-2', data: { live: true } });
    expect(await follow.stop('SIGTERM')).toBe(0);
  });

  it('should say clearly that there is no store in a data directory without one', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'berth-cli-empty-'));
    try {
      const r = await berth(['events', '--data-dir', empty]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no event store at .*events\.sqlite3/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe('berth replay', () => {
  it('should print the fixed fields for every event, stop at --at, and say when the category has no actor type', async () => {
    for (let i = 0; i < 4; i++) await append('gizmo-7', `gizmo.step${i}`, { i });
    await append('gizmo-8', 'gizmo.other', {});
    const r = await berth(['replay', 'gizmo-7', '--json', '--data-dir', dir]);
    expect(r.code).toBe(0);
    const steps = jsonLines(r.stdout);
    expect(steps.map((s) => s.revision)).toEqual([0, 1, 2, 3]);
    for (const s of steps) {
      expect(Object.keys(s).filter((k) => replayFields.includes(k)).sort()).toEqual(replayFields);
      expect(s).toMatchObject({ stream: 'gizmo-7', stateBefore: null, stateAfter: null });
    }
    expect(r.stderr).toMatch(/no actor type is registered for category "gizmo"/);

    const upTo = await berth(['replay', 'gizmo-7', '--at', '1', '--json', '--data-dir', dir]);
    expect(jsonLines(upTo.stdout).map((s) => s.type)).toEqual(['gizmo.step0', 'gizmo.step1']);
    const again = await berth(['replay', 'gizmo-7', '--at', '1', '--json', '--data-dir', dir]);
    expect(again.stdout).toBe(upTo.stdout);
  });

  it('should fail clearly for a stream that does not exist and for a bad --at', async () => {
    await append('gizmo-1', 'gizmo.made', {});
    const missing = await berth(['replay', 'gizmo-404', '--data-dir', dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/stream gizmo-404 does not exist/);
    const bad = await berth(['replay', 'gizmo-1', '--at', 'x', '--data-dir', dir]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--at takes a revision/);
  });

  it('should replay a real environment stream with its states, identically twice', async () => {
    const environment = actorTypes.find((t) => t.type === 'environment');
    expect(environment, 'the registry names the environment actor type').toBeDefined();
    const id = `henv_${'a'.repeat(32)}`;
    const stream = `environment-${id}`;
    // Written by the real actor runtime, as `berth serve` would.
    const actors = new ActorRuntime({ store, runtimeId: 'rt_cli_replay', logger: pino({ level: 'silent' }) });
    actors.register(environment!);
    await actors.start();
    const profile = profileSchema.parse({ provider: 'native' });
    await actors.send('environment', id, { type: 'environment.created', name: 'Demo', slug: 'demo', scope: 'default', profile, at: 1000 });
    await actors.send('environment', id, { type: 'environment.updated', name: 'Demo 2', at: 2000 });
    await actors.whenIdle();
    const first = await berth(['replay', stream, '--json', '--data-dir', dir]);
    expect(first.code).toBe(0);
    const steps = jsonLines(first.stdout);
    expect(steps).toHaveLength(2);
    expect(steps[0].stateAfter).not.toBeNull();
    expect(steps[0].stateBefore).not.toEqual(steps[0].stateAfter);
    expect(steps[1].stateBefore).toEqual(steps[0].stateAfter);
    expect(steps[1].contextDiff).toHaveProperty('name', { before: 'Demo', after: 'Demo 2' });
    expect(steps[1].metadata).toMatchObject({ runtimeId: 'rt_cli_replay', epoch: 1, actorType: 'environment' });
    const second = await berth(['replay', stream, '--json', '--data-dir', dir]);
    expect(second.stdout).toBe(first.stdout);
  });
});
