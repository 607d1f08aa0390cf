/**
 * The typed client of a Berth server (`berth/client`): connect with a URL and a token, then environments (and their
 * content: imports, builds, versions), sessions, executions (run, follow, output, cancel), allocations, stream replay
 * and the audit feed. Errors from the server are BerthApiError with the code of the wire's error shape.
 */
export { Berth } from './berth-client.ts';
export type {
  Allocation,
  BuildRecord,
  ConnectOptions,
  CreateEnvironment,
  Environment,
  ExecutionQuery,
  ImportResult,
  ReplayStepJson,
  RunOptions,
  Session,
  SubmitExecution,
  UpdateEnvironment,
  VersionList,
} from './berth-client.ts';
export { BerthApiError, isBerthApiError } from './berth-api-error.ts';
export type { EventFeed, FeedEvent } from './event-feed.ts';
export type { Page, PageOptions } from './pages.ts';
export type { FollowOptions, StdinSource, TerminalSize } from './execution-follower.ts';
export type { BackoffOptions } from './reconnect-backoff.ts';
export type { ExecutionRecordJson } from '../../schemas/api.ts';
export type { OutputStream } from '../../schemas/output.ts';
export type { ExecutionStatus } from '../../schemas/states.ts';
