/**
 * What effects need of workspaces (Services.workspaces): the view a turn's shell command runs in, checked when it is
 * submitted, and the removal of a deleted managed workspace's directory.
 */
import { BerthError } from '../../../schemas/errors.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import type { WorkspaceView } from '../../providers/provider.ts';
import type { WorkspaceDirectories } from './workspace-directories.ts';

export class WorkspaceHost {
  constructor(
    readonly directories: WorkspaceDirectories,
    private readonly workspace: (id: string) => Promise<WorkspaceContext | undefined>,
  ) {}

  async view(workspaceId: string, cwd: string): Promise<WorkspaceView> {
    const w = await this.workspace(workspaceId);
    if (!w) throw new BerthError('workspace_unavailable', 'The workspace is gone.', { workspaceId, reason: 'deleted' });
    return this.directories.view(w, cwd);
  }

  removeManaged(workspaceId: string): Promise<void> {
    return this.directories.removeManaged(workspaceId);
  }
}
