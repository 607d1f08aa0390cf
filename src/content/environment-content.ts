/**
 * One environment's content, as the gateway and the runtime use it: its source tree, imports into it, version
 * snapshots out of it, crash recovery and removal. A thin facade over the modules that do the work.
 */
import type { ContentLimits } from './content-limits.ts';
import { contentLayout, environmentDir, recoverContent, versionDir, type ContentLayout } from './content-layout.ts';
import { importArchive, type ImportOptions } from './import/archive-import.ts';
import type { Body } from './import/byte-reader.ts';
import { importGit, type GitImportOptions, type GitSource } from './import/git-import.ts';
import type { ImportResult } from './import/import-result.ts';
import { SourceTree } from './source-tree.ts';
import type { Room } from './room-check.ts';
import { removeTree } from './remove-tree.ts';
import { snapshotSource, type SnapshotResult } from './versions.ts';

export class EnvironmentContent {
  readonly layout: ContentLayout;
  readonly source: SourceTree;

  constructor(
    dir: string,
    private readonly limits: Partial<ContentLimits> = {},
    /** Looked at as files written and imported go to disk (room-check.ts): the data directory's reserve. */
    private readonly room?: Room,
  ) {
    this.layout = contentLayout(dir);
    this.source = new SourceTree(this.layout, limits, room);
  }

  /** The content of environment `environmentId` under `<dataDir>/environments/`. */
  static of(dataDir: string, environmentId: string, limits: Partial<ContentLimits> = {}, room?: Room): EnvironmentContent {
    return new EnvironmentContent(environmentDir(dataDir, environmentId), limits, room);
  }

  importArchive(body: Body, options: Omit<ImportOptions, 'limits' | 'room'> = {}): Promise<ImportResult> {
    return importArchive(this.layout, body, { ...options, limits: this.limits, ...(this.room ? { room: this.room } : {}) });
  }

  importGit(source: GitSource, options: Omit<GitImportOptions, 'limits' | 'room'> = {}): Promise<ImportResult> {
    return importGit(this.layout, source, { ...options, limits: this.limits, ...(this.room ? { room: this.room } : {}) });
  }

  /** Copy the source into `versions/<version>` (the build then installs into it and makes it read-only). */
  snapshot(version: number): Promise<SnapshotResult> {
    return snapshotSource(this.layout, version);
  }

  versionDir(version: number): string {
    return versionDir(this.layout, version);
  }

  /** After a crash, before admitting work: finish or undo what was half done (content-layout.ts). */
  recover(): Promise<void> {
    return recoverContent(this.layout);
  }

  /** Remove everything: source, staging and every version. */
  removeAll(): Promise<void> {
    return removeTree(this.layout.root);
  }
}
