/**
 * The content layer (seed 001 §3–4, DESIGN §9): an environment's source files, archive and git imports, version
 * snapshots, read-only layers and the build runner. No HTTP here; the gateway and the build actor call this.
 *
 * A build, in order: `snapshot(version)` → `runBuild({versionDir, …})` → `makeReadOnly(versionDir)`.
 */
export { EnvironmentContent } from './environment-content.ts';
export { contentLayout, environmentDir, recoverContent, versionDir, type ContentLayout } from './content-layout.ts';
export { contentLimits, defaultContentLimits, type ContentLimits } from './content-limits.ts';
export { parseContentPath, resolveContentPath, splitRelativePath, type PathProblem, type ResolvedContentPath } from './content-path.ts';
export { contentTypeOf } from './content-type.ts';
export { SourceTree, type FileRead, type TreeEntry, type TreeListing } from './source-tree.ts';
export { importArchive, type ImportOptions } from './import/archive-import.ts';
export type { Body } from './import/byte-reader.ts';
export { importGit, type GitImportOptions, type GitSource } from './import/git-import.ts';
export type { ImportResult, SkippedReason } from './import/import-result.ts';
export { DEPENDENCY_DIRS, type SkipReason } from './import/member-policy.ts';
export { makeReadOnly, snapshot, snapshotSource, treeBytes, type SnapshotResult } from './versions.ts';
export { removeTree } from './remove-tree.ts';
export { runBuild, type BuildOptions, type BuildResult, type InstalledPackage } from './build-runner.ts';
export { hostToolchain, type ToolchainCommand, type ToolchainExit, type ToolchainRunner } from './toolchain.ts';
