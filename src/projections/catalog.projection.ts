/**
 * The catalog read model: every live Environment of every scope with its state, its content versions and its strictly
 * increasing per-resource `updatedAt` (the same value the environment actor stamps: one rule, `nextUpdatedAt`),
 * folded from the environment streams. Environment listings are answered from it (never from the actors); the
 * allocation's own state is the active-allocation index's.
 */
import type { environmentEvents } from '../../schemas/events/environment.ts';
import type { EnvironmentState } from '../../schemas/states.ts';
import type { EnvironmentContext } from '../machines/environment.machine.ts';
import { nextUpdatedAt } from '../machines/updated-at.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

/** The environment actor's record and content (seed 001 §4: every build in version order, and the pointers). */
type ActorFields = 'id' | 'name' | 'slug' | 'scope' | 'profile' | 'generation' | 'versions' | 'latestVersion' | 'building' | 'activeVersion' | 'createdAt' | 'updatedAt';

export interface CatalogEntry extends Pick<EnvironmentContext, ActorFields> {
  /** '' where the actor keeps null. */
  description: string;
  entry: string;
  /** The environment machine's state: the environment object's `state`. */
  state: EnvironmentState;
  allocationId: string | null;
}

type EnvironmentStoredEvent = StoredEvent<typeof environmentEvents>;
type DataOf<T extends EnvironmentStoredEvent['type']> = Extract<EnvironmentStoredEvent, { type: T }>['data'];

/** The machine state each allocation notice enters. */
const STATE_BY_EVENT: Partial<Record<EnvironmentStoredEvent['type'], EnvironmentState>> = {
  'environment.acquisition_requested': 'acquiring',
  'environment.allocated': 'allocated',
  'environment.allocation_failed': 'idle',
  'environment.allocation_lost': 'lost',
  'environment.allocation_releasing': 'releasing',
  'environment.allocation_released': 'idle',
};

interface CatalogTables {
  environments: CatalogEntry;
}

function reduce(t: Tables<CatalogTables>, e: EnvironmentStoredEvent): void {
  const id = e.stream.slice('environment-'.length);
  if (e.type === 'environment.created') {
    const d = e.data;
    t.environments.put(id, {
      id,
      name: d.name,
      slug: d.slug,
      scope: d.scope,
      description: d.description ?? '',
      entry: d.entry ?? '',
      profile: d.profile,
      state: 'idle',
      allocationId: null,
      generation: 0,
      versions: [],
      latestVersion: 0,
      building: null,
      activeVersion: null,
      createdAt: d.at,
      updatedAt: d.at,
    });
    return;
  }
  const entry = t.environments.get(id);
  // runtime.recovered changes nothing the catalog shows (the machine does not stamp it either).
  if (!entry || e.type === 'runtime.recovered') return;
  // A deleted environment is gone for good (its machine's final state): nothing lists, finds or names it again.
  if (e.type === 'environment.deleted') {
    t.environments.delete(id);
    return;
  }
  entry.updatedAt = nextUpdatedAt(entry.updatedAt, e.data.at);
  entry.state = STATE_BY_EVENT[e.type] ?? entry.state;
  switch (e.type) {
    case 'environment.updated':
      update(entry, e.data);
      break;
    case 'environment.acquisition_requested':
      entry.allocationId = e.data.allocationId;
      entry.generation = e.data.generation;
      break;
    case 'environment.allocation_failed':
    case 'environment.allocation_released':
      entry.allocationId = null;
      break;
    case 'environment.build_requested':
    case 'environment.build_finished':
    case 'environment.version_activated':
      foldContent(entry, e);
      break;
  }
  t.environments.put(id, entry);
}

/** The fields given change; null clears description and entry. */
function update(entry: CatalogEntry, d: DataOf<'environment.updated'>): void {
  if (d.name !== undefined) entry.name = d.name;
  if (d.slug !== undefined) entry.slug = d.slug;
  if (d.profile !== undefined) entry.profile = d.profile;
  if (d.description !== undefined) entry.description = d.description ?? '';
  if (d.entry !== undefined) entry.entry = d.entry ?? '';
}

/** The environment machine's content actions (startBuild, finishBuild, activate) on the catalog entry. */
function foldContent(entry: CatalogEntry, e: EnvironmentStoredEvent): void {
  if (e.type === 'environment.build_requested') {
    const d = e.data;
    entry.versions.push({ version: d.version, status: 'building', startedAt: d.at, finishedAt: null, packages: 0, sizeBytes: 0, error: '' });
    entry.building = d.version;
    entry.latestVersion = d.version;
  } else if (e.type === 'environment.build_finished') {
    const d = e.data;
    const v = entry.versions.find((x) => x.version === d.version);
    if (v) Object.assign(v, { status: d.status, error: d.error, packages: d.packages, sizeBytes: d.sizeBytes, startedAt: d.startedAt ?? v.startedAt, finishedAt: d.at });
    entry.building = null;
    if (d.status === 'ready') entry.activeVersion = d.version;
  } else if (e.type === 'environment.version_activated') {
    entry.activeVersion = e.data.version;
  }
}

export const catalogProjection = defineProjection({
  name: 'catalog',
  version: 5,
  filter: { streamPrefixes: ['environment-'] },
  tables: { environments: table<CatalogEntry>({ columns: ['scope', 'slug'], indexes: [['scope', 'slug']] }) },
  reduce,
  queries: {
    /** One page of `scope`'s environments (every scope's when undefined), in creation order, from after the cursor. */
    page: (t, scope: string | undefined, range: Omit<PageRequest<CatalogEntry>, 'where'>): Page<CatalogEntry> =>
      t.environments.page({ ...range, where: { scope } }),
    count: (t, scope: string): number => t.environments.count({ scope }),
    /** How many of `scope`'s environments have a build running (a member's scope holds at most its quota of them). */
    building: (t, scope: string): number => t.environments.all({ scope }).filter((e) => e.building !== null).length,
    /** Every environment: for maintenance, which walks each one. */
    all: (t): CatalogEntry[] => t.environments.all(),
    get: (t, id: string): CatalogEntry | undefined => t.environments.get(id),
    bySlug: (t, scope: string, slug: string): CatalogEntry | undefined => t.environments.all({ scope, slug })[0],
  },
});
