/**
 * Where each workspace's files are on this host, checked before every use: a directory workspace's root is the
 * admin's mapping as snapshotted at start; a managed one's is `<dataDir>/workspaces/<id>/root`, made by Berth. Both
 * are compared with the identity their workspace recorded, so a root replaced behind Berth's back is never used.
 * Staged inputs live outside the root (`<dataDir>/workspaces/<id>/stage/.berth-inputs`), where no command can swap
 * them for a link, and are shown read-only at `.berth-inputs`.
 */
import { lstatSync } from 'node:fs';
import { chown, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import { learnCtimeGrain } from '../../providers/ctime-grain.ts';
import type { WorkspaceView } from '../../providers/provider.ts';
import { INPUTS_DIR } from './workspace-files.ts';
import { assertRoot, identityOf, storageKey, type RootMapping, type RootSnapshot } from './workspace-roots.ts';

/** Names under the root no command sees (the private directory of issue 13). */
export const HIDDEN_FROM_COMMANDS = ['.berth'];

export interface PlacedWorkspace {
  root: string;
  /** The directory holding the staged inputs' `.berth-inputs` (Berth's own, outside the root). */
  staging: string;
}

export class WorkspaceDirectories {
  constructor(
    private readonly dataDir: string,
    /** Directory mappings snapshotted at start, by storage key. */
    readonly mapped: Map<string, RootSnapshot>,
    readonly mappings: RootMapping[],
    /** Who must own what Berth creates there so commands can write it (Provider.workspaceOwner); absent: the server. */
    readonly owner?: { uid: number; gid: number },
  ) {
    // Managed workspaces live here, and mapped roots often on the same filesystem: their versions may be remembered
    // as soon as they are hashed where ctimes are fine (file-stamp.ts).
    learnCtimeGrain(path.join(dataDir, 'workspaces'));
  }

  private home(workspaceId: string): string {
    if (!/^hwsp_[0-9a-f]{32}$/.test(workspaceId)) throw new BerthError('invalid_request', 'Not a workspace id.', { workspaceId });
    return path.join(this.dataDir, 'workspaces', workspaceId);
  }

  /** Makes the staging directory of a workspace's inputs (its view binds it, so it exists before any command). */
  async makeStaging(workspaceId: string): Promise<void> {
    await mkdir(path.join(this.home(workspaceId), 'stage', INPUTS_DIR), { recursive: true, mode: 0o755 });
  }

  /** Makes a managed workspace's directories and answers the root's identity (recorded by `workspace.created`). */
  async createManaged(workspaceId: string): Promise<string> {
    const root = path.join(this.home(workspaceId), 'root');
    await this.makeStaging(workspaceId);
    await mkdir(root, { mode: 0o755 });
    if (this.owner) await chown(root, this.owner.uid, this.owner.gid);
    const st = lstatSync(root);
    return identityOf(root, st.dev, st.ino);
  }

  /** A deleted managed workspace's directory: removed without following any link a command left in it. */
  async removeManaged(workspaceId: string): Promise<void> {
    await rm(this.home(workspaceId), { recursive: true, force: true });
  }

  /** The root and inputs of a workspace, checked now (workspace_unavailable when gone, replaced or unmapped). */
  async place(w: WorkspaceContext): Promise<PlacedWorkspace> {
    const staging = path.join(this.home(w.id), 'stage');
    if (w.kind === 'directory') {
      const snapshot = this.mapped.get(storageKey(w.scope, w.storageId));
      if (!snapshot) throw new BerthError('workspace_unavailable', 'The workspace\'s root is not mapped on this server any more.', { workspaceId: w.id, reason: 'unmapped' });
      assertRoot(snapshot, w.id);
      if (snapshot.identity !== w.identity) throw new BerthError('workspace_unavailable', 'The workspace\'s directory was replaced.', { workspaceId: w.id, reason: 'root_replaced' });
      return { root: snapshot.root, staging };
    }
    const root = path.join(this.home(w.id), 'root');
    let st;
    try {
      st = lstatSync(root);
    } catch {
      throw new BerthError('workspace_unavailable', 'The workspace\'s directory is gone.', { workspaceId: w.id, reason: 'root_missing' });
    }
    if (!st.isDirectory() || identityOf(root, st.dev, st.ino) !== w.identity) {
      throw new BerthError('workspace_unavailable', 'The workspace\'s directory was replaced.', { workspaceId: w.id, reason: 'root_replaced' });
    }
    return { root, staging };
  }

  /** What a shell command of a turn is given (the provider binds it): the root, its cwd, the inputs, the hidden names. */
  async view(w: WorkspaceContext, cwd: string): Promise<WorkspaceView> {
    const placed = await this.place(w);
    return { source: placed.root, cwd, inputs: path.join(placed.staging, INPUTS_DIR), hidden: HIDDEN_FROM_COMMANDS };
  }
}
