/**
 * The harnesses read model: every live harness with its scope and the environment it names, so a scope's harnesses
 * and the harnesses naming one environment (seed 001 §5: what a rebuild will reach) are listed without a scan.
 */
import type { harnessEvents } from '../../schemas/events/harness.ts';
import { defineProjection, type StoredEvent } from './projection.ts';

export interface HarnessEntry {
  id: string;
  scope: string;
  environmentId: string | null;
  createdAt: number;
}

function reduce(state: Map<string, HarnessEntry>, e: StoredEvent<typeof harnessEvents>): Map<string, HarnessEntry> {
  const id = e.stream.slice('harness-'.length);
  if (e.type === 'harness.created') state.set(id, { id, scope: e.data.scope, environmentId: e.data.environmentId ?? null, createdAt: e.data.at });
  else if (e.type === 'harness.deleted') state.delete(id);
  else if (e.type === 'harness.updated' && e.data.environmentId !== undefined) {
    const entry = state.get(id);
    if (entry) entry.environmentId = e.data.environmentId;
  }
  return state;
}

const byCreation = (a: HarnessEntry, b: HarnessEntry) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1);

export const harnessesProjection = defineProjection({
  name: 'harnesses',
  version: 1,
  filter: { streamPrefixes: ['harness-'] },
  init: () => new Map<string, HarnessEntry>(),
  reduce,
  queries: {
    list: (s: Map<string, HarnessEntry>, scope?: string) => [...s.values()].filter((h) => scope === undefined || h.scope === scope).sort(byCreation),
    naming: (s: Map<string, HarnessEntry>, environmentId: string) => [...s.values()].filter((h) => h.environmentId === environmentId).sort(byCreation),
  },
});
