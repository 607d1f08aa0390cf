/** The workspaces read model: every live workspace with its scope, so a scope's workspaces are listed without a scan. */
import type { workspaceEvents } from '../../schemas/events/workspace.ts';
import { defineProjection, table, type Page, type PageRequest, type StoredEvent, type Tables } from './projection.ts';

export interface WorkspaceEntry {
  id: string;
  scope: string;
  createdAt: number;
}

interface WorkspaceTables {
  workspaces: WorkspaceEntry;
}

function reduce(t: Tables<WorkspaceTables>, e: StoredEvent<typeof workspaceEvents>): void {
  const id = e.stream.slice('workspace-'.length);
  if (e.type === 'workspace.created') t.workspaces.put(id, { id, scope: e.data.scope, createdAt: e.data.at });
  else if (e.type === 'workspace.deleted') t.workspaces.delete(id);
}

export const workspacesProjection = defineProjection({
  name: 'workspaces',
  version: 1,
  filter: { streamPrefixes: ['workspace-'] },
  tables: { workspaces: table<WorkspaceEntry>({ columns: ['scope'], indexes: [['scope']] }) },
  reduce,
  queries: {
    /** One page of `scope`'s workspaces (every scope's when undefined), in creation order, from after the cursor. */
    page: (t, scope: string | undefined, range: Omit<PageRequest<WorkspaceEntry>, 'where'>): Page<WorkspaceEntry> =>
      t.workspaces.page({ ...range, where: { scope } }),
  },
});
