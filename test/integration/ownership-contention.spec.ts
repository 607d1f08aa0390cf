/**
 * Storage ownership under contention (issue 13): 50 concurrent acquisitions of one storage through two runtimes on two
 * store handles of one SQLite file yield one holder, and the runtime that lost the append re-decided (it did not
 * overwrite) and, the stream being the winner's from then on, wrote nothing more (issue 17); a stale release changes
 * nothing; through the turn service, 50 concurrent turns get one holder and a
 * release retried after a lost answer answers the released turn without touching the next holder.
 */
import { chmodSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../src/actors/actor-runtime.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { startBerth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import type { Services } from '../../src/runtime/services.ts';
import { ownershipActor } from '../../src/runtime/workspaces/ownership.actor.ts';
import { storageKey } from '../../src/runtime/workspaces/workspace-roots.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';

const CONTENDERS = 50;
/** The ownership actor has no effects: its services are never read. */
const noEffects = {} as Services;
const alice: Caller = { scope: 'alice', role: 'member' };

let dir: string;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-ownership-contention-')));
  chmodSync(dir, 0o755);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const holderId = (i: number) => `htrn_${i.toString(16).padStart(32, '0')}`;
const acquired = (i: number) => ({ type: 'ownership.acquired', holder: holderId(i), sessionId: `hses_${i}`, workspaceId: 'hws_contended', scope: 'alice', at: Date.now() });

describe('storage ownership under contention', () => {
  it('50 concurrent acquires through two store handles: one holder, 49 busy, the losing append re-decided; a stale release refused', async () => {
    const file = join(dir, 'events.sqlite3');
    const stores = [SqliteEventStore.open(file), SqliteEventStore.open(file)];
    const runtimes = stores.map((store, i) => new ActorRuntime<Services>({ store, runtimeId: `rt_contender_${i}`, services: noEffects }).register(ownershipActor));
    try {
      for (const r of runtimes) await r.start();
      const key = storageKey('alice', 'repo');
      // Both runtimes have decided the storage is free (cached at no revision): each one's first acquisition appends
      // on that belief, so one of the two appends must lose to the other's and be decided again on the new state.
      for (const r of runtimes) expect(await r.get('ownership', key)).toBeUndefined();

      const outcomes = await Promise.allSettled(Array.from({ length: CONTENDERS }, (_, i) => runtimes[i % 2]!.send('ownership', key, acquired(i))));
      const won = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []));
      expect(won).toHaveLength(1);
      const winner = won[0]!;
      const losers = outcomes.filter((o) => o.status === 'rejected');
      expect(losers).toHaveLength(CONTENDERS - 1);
      // The winner's runtime owns the storage's stream from then on (issue 17): its own contenders are told it is
      // held; the other runtime's are sent to the owner, never written.
      outcomes.forEach((o, i) => {
        if (i === winner) return;
        const reason = (o as PromiseRejectedResult).reason;
        if (i % 2 === winner % 2) expect(reason).toMatchObject({ code: 'workspace_busy', detail: { reason: 'held' } });
        else expect(['workspace_busy', 'owned_elsewhere']).toContain(reason.code);
      });
      // Nothing of the holder leaks into a loser's refusal.
      for (const o of losers) expect(JSON.stringify((o as PromiseRejectedResult).reason.detail)).not.toContain('htrn_');

      const losingRuntime = runtimes[1 - (winner % 2)]!;
      const owningRuntime = runtimes[winner % 2]!;
      // The other runtime's first append met the winner's event (wrong expected revision), reloaded and refused.
      expect(losingRuntime.stats.wrongExpectedVersion).toBeGreaterThanOrEqual(1);
      expect(losingRuntime.stats.appended).toBe(0);
      expect(owningRuntime.stats.rejected).toBe(CONTENDERS / 2 - 1);
      for (const r of runtimes) expect((await r.get('ownership', key))?.context.holder.turnId).toBe(holderId(winner));

      // A stale release (another holder's) is refused and leaves the holder as it was; the other runtime may not write.
      const stale = (winner + 1) % CONTENDERS;
      await expect(owningRuntime.send('ownership', key, { type: 'ownership.released', holder: holderId(stale), at: Date.now() })).rejects.toMatchObject({
        code: 'invalid_state',
        detail: { reason: 'not_holder' },
      });
      await expect(losingRuntime.send('ownership', key, { type: 'ownership.released', holder: holderId(winner), at: Date.now() })).rejects.toMatchObject({
        code: 'owned_elsewhere',
      });
      for (const r of runtimes) expect((await r.get('ownership', key))?.context.holder.turnId).toBe(holderId(winner));

      // The holder's release goes through the owner; once more (a retried release) it is refused, not applied.
      await owningRuntime.send('ownership', key, { type: 'ownership.released', holder: holderId(winner), at: Date.now() });
      await expect(owningRuntime.send('ownership', key, { type: 'ownership.released', holder: holderId(winner), at: Date.now() })).rejects.toMatchObject({
        code: 'invalid_state',
      });

      const events = await stores[0]!.readStream(`ownership-${key}`);
      expect(events.map((e) => e.type)).toEqual(['ownership.acquired', 'ownership.released']);
      expect(events[0]!.data).toMatchObject({ holder: holderId(winner) });
      expect(events.map((e) => e.revision)).toEqual([0n, 1n]);
    } finally {
      for (const r of runtimes) await r.whenIdle();
      for (const s of stores) await s.close();
    }
  });

  it('through the turn service: 50 concurrent turns get one holder; a release retried after a lost answer answers the released turn and leaves the next holder', async () => {
    const dataDir = join(dir, 'data');
    const berth = await startBerth({
      settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
      runtimeId: 'rt_contention',
      providers: [new NativeProvider({ dataDir })],
      workspaceRoots: [],
    });
    try {
      const { api } = berth;
      const ws = await api.createWorkspace(alice, { name: 'contended' });
      const sessions = await Promise.all(Array.from({ length: CONTENDERS }, () => api.createSession(alice, { workspaceId: ws.id })));
      const outcomes = await Promise.allSettled(sessions.map((s) => api.openTurn(alice, s.id)));
      const opened = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [{ turn: o.value, session: sessions[i]! }] : []));
      expect(opened).toHaveLength(1);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'workspace_busy' });
      const first = opened[0]!;
      expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(first.turn.id);

      // The release succeeds but its answer is "lost"; meanwhile another turn takes the storage.
      const released = await api.releaseTurn(alice, first.session.id, first.turn.id);
      expect(released.state).toBe('released');
      const nextSession = sessions.find((s) => s.id !== first.session.id)!;
      const next = await api.openTurn(alice, nextSession.id);
      // The client retries the release: the same released turn, not an error, and the new holder keeps the storage.
      const retried = await api.releaseTurn(alice, first.session.id, first.turn.id);
      expect(retried).toEqual(released);
      expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(next.id);
      await expect(api.files.write(alice, nextSession.id, next.id, 'still-mine.txt', Buffer.from('x'))).resolves.toBeDefined();
      await api.releaseTurn(alice, nextSession.id, next.id);
      expect((await api.getWorkspace(alice, ws.id)).holder).toBeNull();
    } finally {
      await berth.stop();
    }
  });
});
