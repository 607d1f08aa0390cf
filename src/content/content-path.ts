/**
 * Path confinement for environment content (seed 001 §3, §9): a relative path that came from a URL or a request body,
 * or an archive member's name, is turned into a path under a root, or refused. Syntax is checked without touching the
 * disk; then every existing component is looked at with lstat (never followed), so no symlink, device, fifo or
 * socket inside the root can carry a path anywhere else.
 */
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../schemas/errors.ts';

/** Why a relative path is not acceptable. Archive members dropped for these reasons are counted under them. */
export type PathProblem =
  | 'empty_path'
  | 'nul_byte'
  | 'absolute_path'
  | 'backslash'
  | 'drive_letter'
  | 'parent_segment'
  | 'empty_segment'
  | 'name_too_long'
  | 'path_too_long';

const MAX_SEGMENT_BYTES = 255;
const MAX_PATH_BYTES = 4096;

/**
 * The segments of a relative path, or the reason it is refused. `.` segments and one trailing slash are harmless and
 * dropped; an empty segment in the middle (`a//b`) is refused because two spellings of one path hide mistakes.
 * An empty result (`''`, `.`, `./`) names the root itself. `maxBytes` bounds the normalised path (`path_too_long`):
 * the room left under the root (ContentLayout.maxPathBytes).
 */
export function splitRelativePath(raw: string, maxBytes = MAX_PATH_BYTES): { segments: string[] } | { problem: PathProblem } {
  if (raw.includes('\0')) return { problem: 'nul_byte' };
  if (raw.includes('\\')) return { problem: 'backslash' };
  if (raw.startsWith('/')) return { problem: 'absolute_path' };
  if (/^[A-Za-z]:/.test(raw)) return { problem: 'drive_letter' };
  if (Buffer.byteLength(raw) > MAX_PATH_BYTES) return { problem: 'name_too_long' };
  const parts = raw.split('/');
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  const segments: string[] = [];
  for (const part of parts) {
    if (part === '..') return { problem: 'parent_segment' };
    if (part === '') return raw === '' ? { segments: [] } : { problem: 'empty_segment' };
    if (part === '.') continue;
    if (Buffer.byteLength(part) > MAX_SEGMENT_BYTES) return { problem: 'name_too_long' };
    segments.push(part);
  }
  if (Buffer.byteLength(segments.join('/')) > maxBytes) return { problem: 'path_too_long' };
  return { segments };
}

const describe: Record<PathProblem, string> = {
  empty_path: 'The path names the root itself.',
  nul_byte: 'The path contains a NUL byte.',
  absolute_path: 'The path is absolute; it must be relative to the environment root.',
  backslash: 'The path contains a backslash.',
  drive_letter: 'The path starts with a drive letter.',
  parent_segment: 'The path contains a `..` segment.',
  empty_segment: 'The path contains an empty segment.',
  name_too_long: 'The path or one of its segments is too long.',
  path_too_long: 'The path would lie too deep under the data directory.',
};

export interface ContentPathOptions {
  /** The root itself is acceptable. */
  allowRoot?: boolean;
  /** The longest normalised path in bytes (path_too_long past it, with detail.max_bytes). */
  maxBytes?: number;
}

/** Segments of a path from the API, or BerthError('environment_invalid'). The root itself only with `allowRoot`. */
export function parseContentPath(raw: string, options: ContentPathOptions = {}): string[] {
  const split = splitRelativePath(raw, options.maxBytes);
  const problem = 'problem' in split ? split.problem : split.segments.length === 0 && !options.allowRoot ? 'empty_path' : null;
  if (problem) {
    const bound = problem === 'path_too_long' ? { max_bytes: options.maxBytes } : {};
    throw new BerthError('environment_invalid', describe[problem], { path: raw, reason: problem, ...bound });
  }
  return (split as { segments: string[] }).segments;
}

export interface ResolvedContentPath {
  /** The absolute path under the root. */
  abs: string;
  /** The normalised relative path (`a/b`), '' for the root. */
  rel: string;
  segments: string[];
  /** What is there now: a regular file, a directory, or nothing (some trailing components are missing). */
  existing: 'file' | 'directory' | null;
}

/**
 * Resolve `raw` under `root`, looking at each existing component with lstat. Refused with environment_invalid:
 * a bad spelling, a symlink anywhere along the way, a non-directory in the middle, or a final component that is
 * neither a regular file nor a directory. The root itself is trusted (Berth made it).
 */
export async function resolveContentPath(root: string, raw: string, options: ContentPathOptions = {}): Promise<ResolvedContentPath> {
  const segments = parseContentPath(raw, options);
  const rel = segments.join('/');
  let existing: ResolvedContentPath['existing'] = segments.length === 0 ? await rootKind(root) : 'directory';
  let current = root;
  for (let i = 0; i < segments.length; i++) {
    current = path.join(current, segments[i]);
    let stats;
    try {
      stats = await lstat(current);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
        existing = null;
        break;
      }
      throw e;
    }
    const refuse = (reason: string, message: string) =>
      new BerthError('environment_invalid', message, { path: raw, reason, at: segments.slice(0, i + 1).join('/') });
    if (stats.isSymbolicLink()) throw refuse('symlink', 'The path goes through a symbolic link.');
    const last = i === segments.length - 1;
    if (!last && !stats.isDirectory()) throw refuse('not_a_directory', 'A component of the path is not a directory.');
    if (last) {
      if (stats.isFile()) existing = 'file';
      else if (stats.isDirectory()) existing = 'directory';
      else throw refuse('special_file', 'The path names something other than a regular file or directory.');
    }
  }
  return { abs: path.join(root, ...segments), rel, segments, existing };
}

async function rootKind(root: string): Promise<'directory' | null> {
  try {
    return (await lstat(root)).isDirectory() ? 'directory' : null;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}
