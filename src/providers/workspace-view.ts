/**
 * A WorkspaceView as a provider takes it: checked for the shape the runtime promises (a relative cwd without `..`;
 * for a directory view, plain hidden names and absolute host directories), and where its command starts when the
 * view is shown at WORKSPACE_TARGET (a native sandbox, a Docker container's staging volume).
 */
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { WORKSPACE_TARGET, type WorkspaceView } from './provider.ts';

const plainName = (name: unknown): boolean =>
  typeof name === 'string' && name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');

const absolute = (p: unknown): boolean => typeof p === 'string' && path.isAbsolute(p) && !p.includes('\0');

/**
 * The workspace's cwd, relative to its root and normalised ('' = the root), or the typed refusal (invalid_request,
 * detail.reason). `cwd` is the execution's own, which a workspace execution must not carry. A `materialized` view
 * names no host directories (Provider.workspaceView), so only its cwd is checked.
 */
export function workspaceCwd(view: WorkspaceView, cwd?: string, kind: 'directory' | 'materialized' = 'directory'): string {
  const refuse = (reason: string, message: string, detail: Record<string, unknown> = {}): never => {
    throw new BerthError('invalid_request', message, { reason, ...detail });
  };
  if (cwd !== undefined) refuse('cwd_with_workspace', 'An execution in a workspace takes its cwd from the workspace, not a cwd of its own.', { cwd });
  if (kind === 'directory' && (!absolute(view.source) || (view.inputs !== undefined && !absolute(view.inputs)))) {
    refuse('workspace_invalid', 'A workspace view names absolute host directories.');
  }
  if (kind === 'directory' && (!Array.isArray(view.hidden) || !view.hidden.every(plainName))) {
    refuse('workspace_invalid', 'A workspace hides plain names under its root.');
  }
  const parts = typeof view.cwd === 'string' && !view.cwd.includes('\0') ? view.cwd.split('/').filter((p) => p !== '' && p !== '.') : undefined;
  // The runtime confined it already; checked again so nothing here can step out of the root it names.
  if (!parts || path.isAbsolute(view.cwd) || parts.includes('..')) {
    refuse('cwd_not_confined', 'A workspace cwd is relative to its root and stays inside it.', { cwd: view.cwd });
  }
  return parts!.join('/');
}

/** Where a command starts when its workspace is shown at WORKSPACE_TARGET: its cwd under it. */
export const chdirInWorkspaceTarget = (relative: string): string => path.posix.join(WORKSPACE_TARGET, relative);
