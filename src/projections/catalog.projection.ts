/**
 * The catalog read model: every Environment of every scope with its status, its content versions and its strictly
 * increasing per-resource `updatedAt` (the same value the environment actor stamps: one rule, `nextUpdatedAt`),
 * folded from the environment streams. Environment listings are answered from it (never from the actors); the
 * allocation's own state is the active-allocation index's.
 */
import type { Profile } from '../../schemas/profile.ts';
import type { RecordedEvent } from '../store/event-store.ts';
import type { VersionSummary } from '../machines/environment.machine.ts';
import { nextUpdatedAt } from '../machines/updated-at.ts';
import { defineProjection } from './projection.ts';

export interface CatalogEntry {
  id: string;
  name: string;
  slug: string;
  scope: string;
  description: string;
  entry: string;
  profile: Profile;
  /** defined | acquiring | allocated | releasing | lost | deleted */
  status: string;
  allocationId: string | null;
  generation: number;
  /** Content (seed 001 §4), as the environment actor keeps it: every build in version order, and the pointers. */
  versions: VersionSummary[];
  latestVersion: number;
  building: number | null;
  activeVersion: number | null;
  createdAt: number;
  updatedAt: number;
}

type Data = Record<string, any>;

const STATUS_BY_EVENT: Record<string, string> = {
  'environment.acquisition_requested': 'acquiring',
  'environment.allocated': 'allocated',
  'environment.allocation_failed': 'defined',
  'environment.allocation_lost': 'lost',
  'environment.allocation_releasing': 'releasing',
  'environment.allocation_released': 'defined',
  'environment.deleted': 'deleted',
};

function reduce(state: Map<string, CatalogEntry>, e: RecordedEvent): Map<string, CatalogEntry> {
  const id = e.stream.slice('environment-'.length);
  const d = e.data as Data;
  if (e.type === 'environment.created') {
    state.set(id, {
      id,
      name: d.name,
      slug: d.slug,
      scope: d.scope,
      description: d.description ?? '',
      entry: d.entry ?? '',
      profile: d.profile,
      status: 'defined',
      allocationId: null,
      generation: 0,
      versions: [],
      latestVersion: 0,
      building: null,
      activeVersion: null,
      createdAt: d.at,
      updatedAt: d.at,
    });
    return state;
  }
  const entry = state.get(id);
  // runtime.recovered changes nothing the catalog shows (the machine does not stamp it either).
  if (!entry || e.type === 'runtime.recovered') return state;
  entry.updatedAt = nextUpdatedAt(entry.updatedAt, d.at);
  if (e.type === 'environment.updated') {
    for (const k of ['name', 'slug', 'profile'] as const) if (d[k] !== undefined) (entry as any)[k] = d[k];
    for (const k of ['description', 'entry'] as const) if (d[k] !== undefined) entry[k] = d[k] ?? '';
  }
  const status = STATUS_BY_EVENT[e.type];
  if (status) entry.status = status;
  if (e.type === 'environment.acquisition_requested') {
    entry.allocationId = d.allocationId;
    entry.generation = d.generation;
  }
  if (e.type === 'environment.allocation_failed' || e.type === 'environment.allocation_released') entry.allocationId = null;
  foldContent(entry, e.type, d);
  return state;
}

/** The environment machine's content actions (startBuild, finishBuild, activate) on the catalog entry. */
function foldContent(entry: CatalogEntry, type: string, d: Data): void {
  if (type === 'environment.build_requested') {
    entry.versions.push({ version: d.version, status: 'building', startedAt: d.at, finishedAt: null, packages: 0, sizeBytes: 0, error: '' });
    entry.building = d.version;
    entry.latestVersion = d.version;
  } else if (type === 'environment.build_finished') {
    const v = entry.versions.find((x) => x.version === d.version);
    if (v) Object.assign(v, { status: d.status, error: d.error, packages: d.packages, sizeBytes: d.sizeBytes, startedAt: d.startedAt ?? v.startedAt, finishedAt: d.at });
    entry.building = null;
    if (d.status === 'ready') entry.activeVersion = d.version;
  } else if (type === 'environment.version_activated') {
    entry.activeVersion = d.version;
  }
}

export const catalogProjection = defineProjection({
  name: 'catalog',
  version: 3,
  filter: { streamPrefixes: ['environment-'] },
  init: () => new Map<string, CatalogEntry>(),
  reduce,
  queries: {
    list: (s: Map<string, CatalogEntry>, scope?: string) =>
      [...s.values()].filter((e) => e.status !== 'deleted' && (scope === undefined || e.scope === scope)),
    get: (s: Map<string, CatalogEntry>, id: string) => s.get(id),
    bySlug: (s: Map<string, CatalogEntry>, scope: string, slug: string) =>
      [...s.values()].find((e) => e.scope === scope && e.slug === slug && e.status !== 'deleted'),
  },
});
