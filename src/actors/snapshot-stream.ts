/**
 * Actor snapshots (DESIGN §4 rule 9): every N events the runtime appends the persisted XState snapshot and the
 * revision it reflects to `snapshot-<type>-<id>`. A stream, not a table, so it works on every store adapter.
 * Snapshots are a cache: losing one only costs a longer fold.
 */
import { z } from 'zod';
import { CorruptEvent, type EventData, type EventStore, type RecordedEvent } from '../store/event-store.ts';
import { isBerthError } from '../../schemas/errors.ts';
import { nameUuid } from './event-id.ts';
import type { PersistedSnapshot } from './machine-step.ts';

export const SNAPSHOT_PREFIX = 'snapshot-';
export const SNAPSHOT_TAKEN = 'snapshot.taken';

export const snapshotStreamOf = (actorStream: string): string => SNAPSHOT_PREFIX + actorStream;

export interface StoredSnapshot {
  /** The actor stream revision the snapshot reflects (its events 0..revision folded). */
  revision: bigint;
  persisted: PersistedSnapshot;
  /** The version of the machine that folded it (machine-version.ts); absent in snapshots written before it was kept. */
  machine?: string;
  /** The actor's owner at `revision` and the epoch that wrote it (ownership.ts); absent in older snapshots. */
  owner?: string;
  ownerEpoch?: number;
}

const snapshotData = z.object({
  revision: z.string().regex(/^\d+$/),
  machine: z.string().optional(),
  owner: z.string().optional(),
  ownerEpoch: z.number().int().nonnegative().optional(),
  snapshot: z.looseObject({ value: z.union([z.string(), z.record(z.string(), z.unknown())]), context: z.unknown() }),
});

export function snapshotEvent(actorStream: string, s: StoredSnapshot): EventData {
  return {
    // One id per (actor stream, revision, machine version): two runtimes writing the same snapshot write it once,
    // and a changed machine's snapshot of a revision is not taken for the old one's.
    id: nameUuid(`${snapshotStreamOf(actorStream)}@${s.revision}${s.machine ? `/${s.machine}` : ''}`),
    type: SNAPSHOT_TAKEN,
    data: {
      revision: s.revision.toString(),
      ...(s.machine ? { machine: s.machine } : {}),
      ...(s.owner ? { owner: s.owner } : {}),
      ...(s.ownerEpoch !== undefined ? { ownerEpoch: s.ownerEpoch } : {}),
      snapshot: s.persisted,
    },
  };
}

export function decodeSnapshot(recorded: RecordedEvent): StoredSnapshot {
  const parsed = snapshotData.safeParse(recorded.data);
  if (recorded.type !== SNAPSHOT_TAKEN || !parsed.success) {
    throw new CorruptEvent(recorded.stream, recorded.revision, 'not a snapshot.taken event');
  }
  const { revision, machine, owner, ownerEpoch, snapshot } = parsed.data;
  return {
    revision: BigInt(revision),
    persisted: snapshot as PersistedSnapshot,
    ...(machine ? { machine } : {}),
    ...(owner ? { owner } : {}),
    ...(ownerEpoch !== undefined ? { ownerEpoch } : {}),
  };
}

export async function readLatestSnapshot(store: EventStore, actorStream: string): Promise<StoredSnapshot | undefined> {
  const stream = snapshotStreamOf(actorStream);
  // Most actors never grow a snapshot: one look at the revision instead of a read that fails with not_found (whose
  // error, built and thrown per actor, was a tenth of recovering 10,000 actors).
  if ((await store.streamRevision(stream)) === 'no_stream') return undefined;
  try {
    const [last] = await store.readStream(stream, { direction: 'backwards', maxCount: 1 });
    return last ? decodeSnapshot(last) : undefined;
  } catch (e) {
    if (isBerthError(e, 'not_found')) return undefined;
    throw e;
  }
}

export const writeSnapshot = (store: EventStore, actorStream: string, s: StoredSnapshot) =>
  store.append(snapshotStreamOf(actorStream), [snapshotEvent(actorStream, s)], { expectedRevision: 'any' });
