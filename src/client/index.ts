/**
 * The typed client of a Berth server (`berth/client`): connect with a URL and a token, then sandboxes (`sandboxes.create`
 * → `run`, `spawn`, `files`, `kill`: the shape an agent wants), or the low-level resources: environments (and their
 * content: imports, builds, versions), workspaces, sessions, tool turns and their file tools, workspace checkpoints and views, leases (bind, acquire, pause, hold, resume, release, their pause feed), executions (run, follow,
 * output, cancel), allocations, stream replay and the audit feed. Errors from the server are BerthApiError with the code of the wire's error shape.
 */
export { Berth } from './berth-client.ts';
export type {
  Allocation,
  BuildRecord,
  Checkpoint,
  CheckpointDiff,
  CheckpointPageOptions,
  CheckpointTree,
  Cleared,
  ConnectOptions,
  CreateEnvironment,
  CreateSession,
  CreateWorkspace,
  Environment,
  ExecutionQuery,
  HistoryEntry,
  ImportResult,
  BindLease,
  Lease,
  LeasePause,
  LeaseQuery,
  LeaseTarget,
  Mount,
  OpenTurn,
  ReplayStepJson,
  Restored,
  RestoreOptions,
  RunOptions,
  RunWhere,
  Session,
  SubmitExecution,
  Turn,
  UpdateEnvironment,
  VersionList,
  WithTurnOptions,
  Workspace,
} from './berth-client.ts';
export { Sandbox, DEFAULT_MAX_OUTPUT_BYTES } from './sandbox.ts';
export type { CommandHandle, CommandOptions, SandboxInfo, SpawnOptions } from './sandbox.ts';
export { Sandboxes, SANDBOX_WORK_KIND } from './sandboxes.ts';
export type { CreateSandbox } from './sandboxes.ts';
export { SandboxFiles } from './sandbox-files.ts';
export { CommandExitError, isCommandExitError } from './command-result.ts';
export type { CommandResult } from './command-result.ts';
export { TurnFiles } from './turn-files.ts';
export type { EntryInfo, FileBytes, FileChanges, FileList, FileRead, FileWritten, WriteOptions } from './turn-files.ts';
export { BerthApiError, isBerthApiError } from './berth-api-error.ts';
export type { EventFeed, Feed, FeedEvent, LeasePauseFrame } from './event-feed.ts';
export type { Page, PageOptions } from './pages.ts';
export type { FollowOptions, StdinSource, TerminalSize } from './execution-follower.ts';
export type { BackoffOptions } from './reconnect-backoff.ts';
export type { ExecutionRecordJson } from '../../schemas/api.ts';
export type { OutputStream } from '../../schemas/output.ts';
export type { ExecutionStatus } from '../../schemas/states.ts';
