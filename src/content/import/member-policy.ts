/**
 * Which archive members land (seed 001 §3.1, §9). Members that must not land are dropped and counted, never written
 * and never followed: unacceptable paths (`..`, absolute, drive letters, backslashes, NUL bytes), every link (a
 * symlink or a hardlink can only point somewhere we would then have to trust), devices, fifos and sockets, anything
 * at or below a dropped link's name, and dependency directories (`node_modules`, `.venv` at any depth: a build installs
 * from the manifests, and what a laptop installed does not run where sessions run). A member that conflicts with an
 * earlier one (a file where a directory landed, or below a file) is dropped too, and so is one whose path would lie
 * too deep under the data directory (`path_too_long`). The policy decides from names only,
 * in archive order, so it needs no look at the disk.
 */
import { splitRelativePath, type PathProblem } from '../content-path.ts';
import type { MemberKind } from './archive-member.ts';

export type SkipReason =
  | PathProblem
  | 'symlink'
  | 'hardlink'
  | 'special_file'
  | 'through_link'
  | 'path_conflict'
  | 'dependency_dir'
  | 'unsupported_type';

export const DEPENDENCY_DIRS: ReadonlySet<string> = new Set(['node_modules', '.venv']);

export type Decision = { land: true; rel: string; segments: string[] } | { land: false; reason: SkipReason } | { land: 'root' };

export class MemberPolicy {
  /** What each landed or refused name is, so later members can be checked against it. */
  private readonly seen = new Map<string, 'file' | 'directory' | 'link'>();

  /** `maxPathBytes`: the longest path that may land (path_too_long past it), as the archive spells it. */
  constructor(private readonly maxPathBytes?: number) {}

  decide(rawPath: string, kind: MemberKind): Decision {
    const split = splitRelativePath(rawPath, this.maxPathBytes);
    if ('problem' in split) return { land: false, reason: split.problem };
    const { segments } = split;
    if (segments.length === 0) return kind === 'directory' ? { land: 'root' } : { land: false, reason: 'empty_path' };
    if (segments.some((s) => DEPENDENCY_DIRS.has(s))) return { land: false, reason: 'dependency_dir' };
    let prefix = '';
    for (let i = 0; i < segments.length - 1; i++) {
      prefix = prefix ? `${prefix}/${segments[i]}` : segments[i];
      const above = this.seen.get(prefix);
      if (above === 'link') return { land: false, reason: 'through_link' };
      if (above === 'file') return { land: false, reason: 'path_conflict' };
    }
    const rel = segments.join('/');
    const before = this.seen.get(rel);
    // A name once given to a dropped link stays refused, whatever comes after under it.
    if (before === 'link') return { land: false, reason: kind === 'symlink' || kind === 'hardlink' ? kind : 'through_link' };
    switch (kind) {
      case 'symlink':
      case 'hardlink':
        if (before === undefined) this.seen.set(rel, 'link');
        return { land: false, reason: kind };
      case 'device':
      case 'fifo':
      case 'socket':
        return { land: false, reason: 'special_file' };
      case 'unsupported':
        return { land: false, reason: 'unsupported_type' };
      case 'directory':
        if (before === 'file') return { land: false, reason: 'path_conflict' };
        this.seen.set(rel, 'directory');
        return { land: true, rel, segments };
      case 'file':
        if (before === 'directory') return { land: false, reason: 'path_conflict' };
        this.seen.set(rel, 'file');
        return { land: true, rel, segments };
    }
  }
}
