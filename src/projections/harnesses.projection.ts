/**
 * The harnesses read model: every live harness with its scope and the environment it names, so a scope's harnesses
 * and the harnesses naming one environment (seed 001 §5: what a rebuild will reach) are listed without a scan.
 */
import type { harnessEvents } from '../../schemas/events/harness.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface HarnessEntry {
  id: string;
  scope: string;
  environmentId: string | null;
  createdAt: number;
}

interface HarnessTables {
  harnesses: HarnessEntry;
}

function reduce(t: Tables<HarnessTables>, e: StoredEvent<typeof harnessEvents>): void {
  const id = e.stream.slice('harness-'.length);
  if (e.type === 'harness.created') t.harnesses.put(id, { id, scope: e.data.scope, environmentId: e.data.environmentId ?? null, createdAt: e.data.at });
  else if (e.type === 'harness.deleted') t.harnesses.delete(id);
  else if (e.type === 'harness.updated' && e.data.environmentId !== undefined) {
    const entry = t.harnesses.get(id);
    if (entry) t.harnesses.put(id, { ...entry, environmentId: e.data.environmentId });
  }
}

export const harnessesProjection = defineProjection({
  name: 'harnesses',
  version: 2,
  filter: { streamPrefixes: ['harness-'] },
  tables: { harnesses: table<HarnessEntry>({ columns: ['scope', 'environmentId'], indexes: [['scope'], ['environmentId']] }) },
  reduce,
  queries: {
    /** One page of `scope`'s harnesses (every scope's when undefined), in creation order, from after the cursor. */
    page: (t, scope: string | undefined, range: Omit<PageRequest<HarnessEntry>, 'where'>): Page<HarnessEntry> =>
      t.harnesses.page({ ...range, where: { scope } }),
    /** One page of the harnesses naming `environmentId`, in creation order, from after the cursor. */
    naming: (t, environmentId: string, range: Omit<PageRequest<HarnessEntry>, 'where'>): Page<HarnessEntry> =>
      t.harnesses.page({ ...range, where: { environmentId } }),
  },
});
