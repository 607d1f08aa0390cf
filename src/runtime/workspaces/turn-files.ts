/**
 * The file tools of a turn over one placed workspace: paths are relative to the workspace root; `.berth-inputs/…`
 * names the staged inputs, which live outside the root (workspace-directories.ts) and are read-only to every tool
 * but `stage`. Confinement itself is WorkspaceFiles' (component by component, no link ever followed).
 */
import { BerthError } from '../../../schemas/errors.ts';
import type { PlacedWorkspace } from './workspace-directories.ts';
import { INPUTS_DIR, WorkspaceFiles } from './workspace-files.ts';

/** The largest file one tool call reads or writes (file_too_large past it). */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

const inInputs = (path: string): string | undefined => {
  if (path === INPUTS_DIR || path === `${INPUTS_DIR}/`) return '';
  return path.startsWith(`${INPUTS_DIR}/`) ? path.slice(INPUTS_DIR.length + 1) : undefined;
};

const readOnly = (path: string) =>
  new BerthError('invalid_request', 'Staged inputs are read-only to tools: stage them instead.', { path, reason: 'read_only_path' });

export class TurnFiles {
  readonly root: WorkspaceFiles;
  readonly inputs: WorkspaceFiles;

  constructor(placed: PlacedWorkspace, owner?: { uid: number; gid: number }) {
    this.root = new WorkspaceFiles(placed.root, { maxFileBytes: MAX_FILE_BYTES, ...(owner ? { owner } : {}) });
    this.inputs = new WorkspaceFiles(placed.inputs, { maxFileBytes: MAX_FILE_BYTES });
  }

  /** Throws unless `path` ('' the root) is a directory reached without a link. */
  async directory(path: string): Promise<void> {
    if (path === '') return;
    const st = await this.stat(path);
    if (st.type === 'symlink') throw new BerthError('invalid_request', 'The path is a symbolic link.', { path, reason: 'symlink' });
    if (st.type !== 'directory') throw new BerthError('invalid_request', 'The path is not a directory.', { path, reason: 'not_a_directory' });
  }

  read(path: string, opts?: { offset?: number; limit?: number }) {
    const input = inInputs(path);
    return input === undefined ? this.root.read(path, opts) : this.inputs.read(input, opts);
  }

  list(path: string, opts?: { limit?: number; cursor?: string }) {
    const input = inInputs(path);
    return input === undefined ? this.root.list(path, opts) : this.inputs.list(input, opts);
  }

  stat(path: string) {
    const input = inInputs(path);
    if (input === '') return this.inputs.stat('').catch(() => this.root.stat(path));
    return input === undefined ? this.root.stat(path) : this.inputs.stat(input);
  }

  write(path: string, data: Buffer, opts?: { ifMatch?: string; parents?: boolean }) {
    if (inInputs(path) !== undefined) throw readOnly(path);
    return this.root.write(path, data, opts);
  }

  edit(path: string, oldText: string, newText: string, opts?: { ifMatch?: string }) {
    if (inInputs(path) !== undefined) throw readOnly(path);
    return this.root.edit(path, oldText, newText, opts);
  }

  mkdir(path: string, opts?: { parents?: boolean }) {
    if (inInputs(path) !== undefined) throw readOnly(path);
    return this.root.mkdir(path, opts);
  }

  remove(path: string, opts?: { recursive?: boolean }) {
    if (inInputs(path) !== undefined) throw readOnly(path);
    return this.root.remove(path, opts);
  }

  /** Stages an input (path relative to the inputs directory): the one way bytes get there. */
  async stage(path: string, data: Buffer) {
    const result = await this.inputs.write(path, data, { parents: true });
    return { ...result, change: { ...result.change, path: `${INPUTS_DIR}/${result.change.path}` } };
  }
}
