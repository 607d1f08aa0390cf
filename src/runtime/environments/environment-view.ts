/**
 * The environment object callers see (DESIGN §8, seed 001 §2), rendered from the environment's catalog entry: one
 * shape for `GET /v1/environments`, `GET /v1/catalog` and `GET /v1/environments/{id}`.
 */
import type { InstalledPackageJson } from '../../../schemas/events/build.ts';
import type { CatalogEntry } from '../../projections/catalog.projection.ts';
import type { VersionEntry } from '../builds/content-api.ts';
import type { FileSummary } from '../builds/content-summaries.ts';
import type { EnvironmentView } from '../runtime-api.ts';

/** The content fields of the environment object (seed 001 §2), when the content chapter is on. */
export interface EnvironmentContentFields {
  status: 'empty' | 'building' | 'ready' | 'failed';
  version: number | null;
  latestVersion: number | null;
  files: FileSummary;
  packages: InstalledPackageJson[];
  versions: VersionEntry[];
  build: Omit<VersionEntry, 'packages' | 'size' | 'active'> | null;
}

export interface EnvironmentViewParts {
  availability: EnvironmentView['availability'];
  /** The state of the allocation the entry names; undefined when there is no such allocation. */
  allocationState: string | undefined;
  content: EnvironmentContentFields | undefined;
}

export function environmentView(e: CatalogEntry, parts: EnvironmentViewParts): EnvironmentView {
  const c = parts.content;
  // Every object gets its keys in one order (a listing of 1,000 builds and serialises twice as fast as with a spread).
  const view: EnvironmentView = {
    id: e.id,
    object: 'environment',
    name: e.name,
    slug: e.slug,
    description: e.description,
    entry: e.entry,
    status: c ? c.status : 'empty',
    mount: `/env/${e.slug}`,
    version: c ? c.version : null,
    latestVersion: c ? c.latestVersion : null,
    profile: e.profile,
    availability: parts.availability,
    // The allocation lifecycle (the environment machine's state); `status` is the content's (seed 001).
    state: e.state,
    allocation:
      e.allocationId !== null && parts.allocationState !== undefined
        ? { allocationId: e.allocationId, generation: e.generation, state: parts.allocationState }
        : null,
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
  };
  if (c) {
    view.files = c.files;
    view.packages = c.packages;
    view.versions = c.versions;
    view.build = c.build;
  }
  return view;
}
