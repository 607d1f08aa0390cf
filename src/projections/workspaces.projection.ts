/** The workspaces read model: every live workspace with its scope, so a scope's workspaces are listed without a scan. */
import type { workspaceEvents } from '../../schemas/events/workspace.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface WorkspaceEntry {
  id: string;
  scope: string;
  kind: 'directory' | 'managed';
  createdAt: number;
}

interface WorkspaceTables {
  workspaces: WorkspaceEntry;
}

function reduce(t: Tables<WorkspaceTables>, e: StoredEvent<typeof workspaceEvents>): void {
  const id = e.stream.slice('workspace-'.length);
  if (e.type === 'workspace.created') t.workspaces.put(id, { id, scope: e.data.scope, kind: e.data.kind, createdAt: e.data.at });
  else if (e.type === 'workspace.deleted') t.workspaces.delete(id);
}

export const workspacesProjection = defineProjection({
  name: 'workspaces',
  version: 2,
  filter: { streamPrefixes: ['workspace-'] },
  tables: { workspaces: table<WorkspaceEntry>({ columns: ['scope', 'kind'], indexes: [['scope'], ['scope', 'kind']] }) },
  reduce,
  queries: {
    /** One page of `scope`'s workspaces (every scope's when undefined), in creation order, from after the cursor. */
    page: (t, scope: string | undefined, range: Omit<PageRequest<WorkspaceEntry>, 'where'>): Page<WorkspaceEntry> =>
      t.workspaces.page({ ...range, where: { scope } }),
    /** How many live managed workspaces `scope` has (its members' quota; directory ones are the admin's). */
    managedCount: (t, scope: string): number => t.workspaces.count({ scope, kind: 'managed' }),
  },
});
