/**
 * The history check (Temporal's replay test): folds every actor stream of a log through today's machines and reports
 * each stored event that today's machine would refuse, or would fold to another state than the one recorded with it
 * (`metadata.to` and `finished`, stamped by the runtime on every transition). Run it before shipping a machine change:
 * a report means histories already recorded would not replay the same, so recovery and replay would diverge.
 */
import type { AnyMachineSnapshot } from 'xstate';
import type { EventStore, RecordedEvent } from '../store/event-store.ts';
import type { ActorType } from './actor-type.ts';
import { decide, isFinished } from './decide.ts';
import { decodeStored, storedEventOf } from './event-codec.ts';
import { step, stateLabel } from './machine-step.ts';
import { streamResolver } from './recovery-scan.ts';
import { ACTOR_ADOPTED } from './ownership.ts';
import { foldStored, freshActor, type LoadedActor } from './rehydrate.ts';

export type HistoryProblemKind = 'refused' | 'state' | 'finished' | 'undecodable' | 'unknown_type';

export interface HistoryProblem {
  stream: string;
  revision: string;
  position: string;
  type: string;
  problem: HistoryProblemKind;
  /** What the log recorded, and what today's machine makes of it (state labels, or `finished` flags). */
  recorded?: string;
  replayed?: string;
  message: string;
}

export interface HistoryReport {
  streams: number;
  events: number;
  problems: HistoryProblem[];
}

export interface HistoryCheckOptions {
  pageSize?: number;
  /** Stop collecting after this many problems (the count of streams and events still covers the whole log). */
  maxProblems?: number;
}

interface Tracked {
  actorType: ActorType;
  loaded: LoadedActor;
}

export async function checkHistory(store: EventStore, types: Iterable<ActorType>, opts: HistoryCheckOptions = {}): Promise<HistoryReport> {
  const pageSize = opts.pageSize ?? 1000;
  const maxProblems = opts.maxProblems ?? 1000;
  const resolve = streamResolver(types);
  /** Actors being folded; one that finished is dropped (a later event of its stream folds it again from the log). */
  const live = new Map<string, Tracked>();
  /** Streams with a problem: once diverged, their later events would only repeat it. */
  const broken = new Set<string>();
  const seen = new Set<string>();
  const report: HistoryReport = { streams: 0, events: 0, problems: [] };
  const problem = (e: RecordedEvent, kind: HistoryProblemKind, message: string, recorded?: string, replayed?: string) => {
    broken.add(e.stream);
    live.delete(e.stream);
    if (report.problems.length >= maxProblems) return;
    report.problems.push({
      stream: e.stream,
      revision: e.revision.toString(),
      position: e.position.toString(),
      type: e.type,
      problem: kind,
      ...(recorded !== undefined ? { recorded } : {}),
      ...(replayed !== undefined ? { replayed } : {}),
      message,
    });
  };

  const tracked = async (e: RecordedEvent, actorType: ActorType, id: string): Promise<Tracked> => {
    const known = live.get(e.stream);
    if (known) return known;
    let loaded = freshActor(actorType, id);
    if (seen.has(e.stream)) {
      // Finished earlier and checked up to here: fold the earlier events again, unchecked (a compacted stream has
      // gaps, so the read is cut by revision, not by count).
      const before = await store.readStream(e.stream, { maxCount: Number(e.revision) + 1 });
      loaded = foldStored(actorType, loaded, before.filter((r) => r.revision < e.revision).map(storedEventOf));
    }
    const t = { actorType, loaded };
    live.set(e.stream, t);
    return t;
  };

  for (let from: bigint | 'start' = 'start'; ; ) {
    const page = await store.readAll({ fromPosition: from, maxCount: pageSize });
    for (const e of page) {
      if (typeof e.metadata.actorType !== 'string' || broken.has(e.stream)) continue;
      report.events++;
      const resolved = resolve(e.stream);
      if (!resolved || resolved.actorType.type !== e.metadata.actorType) {
        problem(e, 'unknown_type', `no actor type ${String(e.metadata.actorType)} is registered for this stream`);
        continue;
      }
      const t = await tracked(e, resolved.actorType, resolved.id);
      seen.add(e.stream);
      if (e.type === ACTOR_ADOPTED) {
        // A change of owner, not of state (ownership.ts).
        t.loaded = foldStored(t.actorType, t.loaded, [storedEventOf(e)]);
        continue;
      }
      let next: AnyMachineSnapshot;
      try {
        const event = decodeStored(t.actorType, storedEventOf(e));
        if (e.metadata.compacted === true) [next] = step(t.actorType.machine, t.loaded.snapshot, event);
        else {
          const decision = decide(t.actorType, t.loaded.snapshot, event);
          if (!decision.accepted) {
            problem(e, 'refused', decision.error.message, String(e.metadata.to ?? ''), stateLabel(t.loaded.snapshot.value));
            continue;
          }
          next = decision.next;
        }
      } catch (error) {
        problem(e, 'undecodable', (error as Error).message);
        continue;
      }
      const replayed = stateLabel(next.value);
      if (typeof e.metadata.to === 'string' && e.metadata.to !== replayed) {
        problem(e, 'state', `recorded ${e.metadata.to}, today's machine folds it to ${replayed}`, e.metadata.to, replayed);
        continue;
      }
      const done = isFinished(t.actorType, next);
      if (typeof e.metadata.finished === 'boolean' && e.metadata.finished !== done) {
        problem(e, 'finished', `recorded finished=${e.metadata.finished}, today's machine says ${done}`, String(e.metadata.finished), String(done));
        continue;
      }
      t.loaded = { snapshot: next, revision: e.revision };
      if (done) live.delete(e.stream);
    }
    if (page.length < pageSize) break;
    from = page[page.length - 1].position;
  }
  report.streams = seen.size + [...broken].filter((s) => !seen.has(s)).length;
  return report;
}
