/**
 * The file tools of a turn over one placed workspace: paths are relative to the workspace root; `.berth-inputs/…`
 * names the staged inputs, which live outside the root (in Berth's staging directory, workspace-directories.ts) and
 * are read-only to every tool but `stage`. Confinement itself is WorkspaceFiles' (component by component, no link
 * ever followed).
 */
import { BerthError } from '../../../schemas/errors.ts';
import type { PlacedWorkspace } from './workspace-directories.ts';
import { INPUTS_DIR, WorkspaceFiles, type FileBytes } from './workspace-files.ts';

/** The largest file one tool call reads or writes (file_too_large past it). */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

/** Paths under the staged inputs go to the staging directory (which holds `.berth-inputs` and nothing else). */
const inInputs = (path: string): boolean => path === INPUTS_DIR || path.startsWith(`${INPUTS_DIR}/`);

export class TurnFiles {
  private readonly root: WorkspaceFiles;
  private readonly staging: WorkspaceFiles;

  /** `room`: looked at before each batch of a write goes to disk (the data directory's reserve, for a member). */
  constructor(placed: PlacedWorkspace, owner?: { uid: number; gid: number }, room?: () => Promise<void>) {
    this.root = new WorkspaceFiles(placed.root, { maxFileBytes: MAX_FILE_BYTES, ...(owner ? { owner } : {}), ...(room ? { room } : {}) });
    this.staging = new WorkspaceFiles(placed.staging, { maxFileBytes: MAX_FILE_BYTES, ...(room ? { room } : {}) });
  }

  /** The tools of the root, or of the staging directory for `.berth-inputs/…` (read-only there but to `stage`). */
  private of(path: string): WorkspaceFiles {
    return inInputs(path) ? this.staging : this.root;
  }

  /** Throws unless `path` ('' the root) is a directory reached without a link. */
  async directory(path: string): Promise<void> {
    if (path === '') return;
    const st = await this.stat(path);
    if (st.type === 'symlink') throw new BerthError('invalid_request', 'The path is a symbolic link.', { path, reason: 'symlink' });
    if (st.type !== 'directory') throw new BerthError('invalid_request', 'The path is not a directory.', { path, reason: 'not_a_directory' });
  }

  read(path: string, opts?: { offset?: number; limit?: number }) {
    return this.of(path).read(path, opts);
  }

  readStream(path: string, opts?: { offset?: number; limit?: number }) {
    return this.of(path).readStream(path, opts);
  }

  list(path: string, opts?: { limit?: number; cursor?: string }) {
    return this.of(path).list(path, opts);
  }

  stat(path: string) {
    return this.of(path).stat(path);
  }

  write(path: string, data: FileBytes, opts?: { ifMatch?: string; parents?: boolean }) {
    return this.of(path).write(path, data, opts);
  }

  edit(path: string, oldText: string, newText: string, opts?: { ifMatch?: string }) {
    return this.of(path).edit(path, oldText, newText, opts);
  }

  mkdir(path: string, opts?: { parents?: boolean }) {
    return this.of(path).mkdir(path, opts);
  }

  remove(path: string, opts?: { recursive?: boolean }) {
    return this.of(path).remove(path, opts);
  }

  /** Stages an input (path relative to `.berth-inputs`): the one way bytes get there. */
  stage(path: string, data: FileBytes) {
    return this.staging.stage(path, data);
  }
}
