/**
 * The workspace views a `berth host` keeps for the control plane (its `remote` provider's views are materialized):
 * a provider whose views live in its allocations (a container's staging volume) serves its own file host; for one
 * that binds a host directory per command (native), the host keeps one directory per allocation under its data
 * directory, owned by whoever its commands run as, and hands commands that directory as their workspace.
 */
import { chownSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { DirectoryFileHost } from '../providers/directory-file-host.ts';
import type { FileHost } from '../providers/file-host.ts';
import { isSpoolName } from '../providers/spool.ts';
import type { AllocationRef, Provider, WorkspaceView } from '../providers/provider.ts';

/** What a command's workspace says on the wire: where it starts, relative to the view, and what it must not see. */
export interface WireWorkspace {
  cwd: string;
  hidden: string[];
}

export class HostViews {
  private readonly root: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, 'host', 'views');
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
  }

  private dir(allocationId: string): string {
    if (!isSpoolName(allocationId)) throw new BerthError('invalid_request', 'An allocation id must be usable as a directory name.', { allocationId });
    return join(this.root, allocationId);
  }

  /** Made with the allocation (idempotent), for providers that take a directory per command. */
  prepare(provider: Provider, allocationId: string): void {
    if (provider.workspaceView !== 'directory') return;
    const dir = this.dir(allocationId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const owner = provider.workspaceOwner;
    if (owner) chownSync(dir, owner.uid, owner.gid);
  }

  remove(provider: Provider, allocationId: string): void {
    if (provider.workspaceView === 'directory') rmSync(this.dir(allocationId), { recursive: true, force: true });
  }

  /** The view as the provider's executor takes it: the host directory for `directory` providers, none otherwise. */
  view(provider: Provider, allocationId: string, wire: WireWorkspace): WorkspaceView {
    const source = provider.workspaceView === 'directory' ? this.dir(allocationId) : '';
    return { source, cwd: wire.cwd, hidden: wire.hidden };
  }

  fileHost(provider: Provider, ref: AllocationRef): Promise<FileHost> {
    if (provider.workspaceView === 'directory') return Promise.resolve(new DirectoryFileHost(this.dir(ref.allocationId), provider.workspaceOwner));
    if (provider.workspaceView === 'materialized' && provider.fileHost) return provider.fileHost(ref);
    throw new BerthError('workspace_unavailable', 'This host\'s provider keeps no workspace view.', { reason: 'no_file_host' });
  }
}
