/**
 * The environment object callers see (DESIGN §8, seed 001 §2), rendered from the environment's catalog entry: one
 * shape for `GET /v1/environments`, `GET /v1/catalog` and `GET /v1/environments/{id}`.
 */
import type { CatalogEntry } from '../projections/catalog.projection.ts';
import type { EnvironmentView } from './runtime-api.ts';

export interface EnvironmentViewParts {
  availability: EnvironmentView['availability'];
  /** The state of the allocation the entry names; undefined when there is no such allocation. */
  allocationState: string | undefined;
  /** The content fields (status, versions, files…), when the content chapter is on. */
  content: Record<string, unknown> | undefined;
}

export const environmentView = (e: CatalogEntry, parts: EnvironmentViewParts): EnvironmentView => ({
  id: e.id,
  object: 'environment',
  name: e.name,
  slug: e.slug,
  description: e.description,
  entry: e.entry,
  status: 'empty',
  mount: `/env/${e.slug}`,
  version: null,
  latestVersion: null,
  profile: e.profile,
  availability: parts.availability,
  // The allocation lifecycle (the actor's state: idle, acquiring, allocated, releasing, lost; the catalog says
  // `defined` for idle); `status` is the content's (seed 001).
  state: e.status === 'defined' ? 'idle' : e.status,
  allocation:
    e.allocationId !== null && parts.allocationState !== undefined
      ? { allocationId: e.allocationId, generation: e.generation, state: parts.allocationState }
      : null,
  createdAt: e.createdAt,
  updatedAt: e.updatedAt,
  ...parts.content,
});
