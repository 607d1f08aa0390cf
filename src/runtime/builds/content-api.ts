/**
 * The Environments content chapter of the runtime API (seed 001 §3–5): files, imports, builds, versions and
 * harnesses. `RuntimeApi.content` holds it when the chapter is on; the gateway answers 404 for every content endpoint
 * when it is absent. Timestamps named `*_at` are Unix seconds, as the seed writes them; `createdAt`/`updatedAt` are
 * milliseconds, as everywhere else in Berth.
 */
import type { Readable } from 'node:stream';
import type { Body } from '../../content/import/byte-reader.ts';
import type { ImportResult } from '../../content/import/import-result.ts';
import type { Caller } from '../caller.ts';
import type { Listing, PageQuery } from '../listing.ts';

export interface FileTree {
  files: { count: number; bytes: number };
  entries: { path: string; type: 'file' | 'directory'; size: number }[];
}

export interface FileBytes {
  path: string;
  size: number;
  contentType: string;
  stream: Readable;
}

export interface PackageView {
  manager: 'npm' | 'pip';
  name: string;
  version: string;
}

export type BuildStatus = 'building' | 'ready' | 'failed';

export interface BuildRecord {
  object: 'build';
  environment: string;
  version: number;
  status: BuildStatus;
  started_at: number;
  finished_at: number | null;
  error: string;
  /** The installers' own output (while building: as far as it got). */
  log: string;
  packages: PackageView[];
  /** Bytes of the version directory once built. */
  size: number;
  active: boolean;
}

export interface VersionEntry {
  version: number;
  status: BuildStatus;
  started_at: number;
  finished_at: number | null;
  packages: number;
  size: number;
  error: string;
  active: boolean;
}

export interface VersionList {
  environment: string;
  active: number | null;
  latest: number | null;
  versions: VersionEntry[];
}

export interface HarnessView {
  id: string;
  object: 'harness';
  name: string;
  base: string | null;
  environment: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface HarnessInput {
  name?: string;
  base?: string | null;
  environment?: string | null;
}

export interface ContentApi {
  tree(caller: Caller, environmentId: string): Promise<FileTree>;
  readFile(caller: Caller, environmentId: string, path: string): Promise<FileBytes>;
  /** `declaredBytes` (a Content-Length) refuses an oversized body before reading it. */
  writeFile(caller: Caller, environmentId: string, path: string, body: Body, declaredBytes?: number): Promise<{ path: string; size: number }>;
  makeDirectory(caller: Caller, environmentId: string, path: string): Promise<{ path: string; created: boolean }>;
  removePath(caller: Caller, environmentId: string, path: string): Promise<{ path: string; type: 'file' | 'directory' }>;
  importArchive(caller: Caller, environmentId: string, body: Body, options: { replace?: boolean }): Promise<ImportResult>;
  importGit(caller: Caller, environmentId: string, source: { url: string; ref?: string }, options: { replace?: boolean }): Promise<ImportResult>;

  startBuild(caller: Caller, environmentId: string): Promise<BuildRecord>;
  getBuild(caller: Caller, environmentId: string, version: number): Promise<BuildRecord>;
  versions(caller: Caller, environmentId: string): Promise<VersionList>;
  activate(caller: Caller, environmentId: string, version: number): Promise<VersionList>;

  createHarness(caller: Caller, input: HarnessInput & { name: string }): Promise<HarnessView>;
  listHarnesses(caller: Caller, page?: PageQuery): Promise<Listing<HarnessView>>;
  getHarness(caller: Caller, id: string): Promise<HarnessView>;
  updateHarness(caller: Caller, id: string, patch: HarnessInput): Promise<HarnessView>;
  deleteHarness(caller: Caller, id: string): Promise<void>;
  /** The harnesses that name this environment (what a rebuild will reach). */
  environmentHarnesses(caller: Caller, environmentId: string, page?: PageQuery): Promise<Listing<HarnessView>>;
}
