/**
 * The provider port (DESIGN §6): a provider turns an allocation intent into one physical resource and gives an
 * Executor for it. Every call is idempotent per request id, so recovery can inspect instead of repeating.
 */
import type { OutputStream } from '../../schemas/output.ts';
import type { Ownership, Profile, ProviderKind, ReusePolicy } from '../../schemas/profile.ts';
import type { FileHost } from './file-host.ts';
import type { SandboxIdentity } from './native/sandbox-identity.ts';

export interface AllocationIntent {
  environmentId: string;
  allocationId: string;
  /** The original request identity: labels the physical resource, and is how `inspect` finds it again. */
  requestId: string;
  generation: number;
  profile: Profile;
  /**
   * Read-only binds made with the allocation (Docker: a running container cannot gain mounts, so the active content
   * version is bound at /env/<slug> when the container is created). Native allocations take mounts per command.
   */
  mounts?: ReadOnlyMount[];
  /** The content version `mounts` binds, recorded with the intent and on the container's labels. */
  contentVersion?: number;
}

/** The physical identity of an allocation. `incarnation` (container id + start time) fences it. */
export interface PhysicalIdentity {
  provider: ProviderKind;
  /** native: the host name; docker: the container id. */
  resourceId: string;
  incarnation?: string;
  networkId?: string;
  volume?: string;
}

export type AllocationReport =
  | { status: 'ready'; identity: PhysicalIdentity }
  /** Partly created (e.g. container created, not started): may be resumed under the same intent. */
  | { status: 'pending'; identity?: PhysicalIdentity; reason: string }
  /** Confirmed absent: nothing carries this request id. */
  | { status: 'absent' }
  /** Cannot tell (daemon unreachable, timeout): never treated as absent. */
  | { status: 'unknown'; reason: string }
  /** Present, but not the incarnation Berth recorded (restarted behind its back): reported, not adopted. */
  | { status: 'fenced'; identity: PhysicalIdentity; reason: string };

export interface AllocationRef {
  requestId: string;
  allocationId: string;
  environmentId: string;
  identity?: PhysicalIdentity;
  /** The intent's generation, so a provider that forwards calls (remote) can have them fenced by it. */
  generation?: number;
  /** The intent's profile, so a provider that holds several backends (remote: hosts) finds the allocation's own. */
  profile?: Profile;
}

/**
 * Everything that differs per provider is here, as a capability; nothing above src/providers names a kind. The
 * runtime records what it must replay (ownership on the allocation intent, the reuse policy on the environment).
 */
export interface Provider {
  /** The key it is registered under (src/runtime/provider-registry.ts), named by profiles. */
  readonly kind: ProviderKind;
  /** Never destroyed by Berth (the host) vs created and reclaimed by Berth (containers). */
  readonly ownership: Ownership;
  /** How widely an allocation is shared when the profile names no `reuse` policy. */
  readonly defaultReuse: ReusePolicy;
  /**
   * How a content version reaches a command: bound read-only when the allocation is made (`allocation`: a running
   * container cannot gain mounts, so the allocation keeps the version it was made with), or per command (`command`).
   */
  readonly contentBinding: 'allocation' | 'command';
  /**
   * The command, variables and mounts of an execution that reads the content version at `spec.version` (seed 001 §6:
   * PATH, PYTHONPATH, NODE_PATH and PROJECT_ROOT lead to it). Throws `unavailable` when the read-only view cannot be
   * made (so nothing runs with a version that is only described).
   */
  versionedCommand(spec: VersionedCommandSpec): VersionedCommand;
  /**
   * Create (or adopt/resume what already carries `intent.requestId`) and start. Throws `environment_invalid` when
   * the provider refuses the profile (nothing made), and `provider_unavailable` when it does not answer before
   * anything was sent (so this call made nothing).
   */
  allocate(intent: AllocationIntent): Promise<AllocationReport>;
  inspect(ref: AllocationRef): Promise<AllocationReport>;
  /** Remove every physical part (container, network, volume) and confirm absence. */
  deallocate(ref: AllocationRef): Promise<'terminated' | 'unknown'>;
  executor(ref: AllocationRef, profile: Profile): Executor;
  /**
   * Whose base environment a command gets under the caller's variables: the host's minimal one (PATH, HOME, USER,
   * LANG: command-env.ts), or the image's own (the exec adds its PATH and HOME).
   */
  readonly commandBase: 'host' | 'image';
  /**
   * Builds inside the Environment's own image: a one-off container binding the version directory writable, whose
   * steps write it as `buildUid`. A provider without it has its builds run on the host's toolchain.
   */
  startBuildContainer?(options: BuildContainerOptions): Promise<BuildContainerHandle>;
  readonly buildUid?: number;
  /** Removes what an interrupted build left behind (its container): idempotent. */
  removeBuild?(buildId: string): Promise<void>;
  /**
   * Checks an execution before it is accepted: throws the typed refusal (invalid_request with detail.reason) for
   * what this provider will not run as asked (a contained command's cwd outside what its sandbox shows). Providers
   * without the capability accept everything the executor's own validation does.
   */
  admit?(admission: Admission, profile: Profile): void | Promise<void>;
  /**
   * Refuses, when an environment is created or its profile changed, a profile this provider can never run (a remote
   * profile naming no configured host): invalid_request whose detail names the field.
   */
  checkProfile?(profile: Profile): void;
  /**
   * Its borrowed machines can be replaced behind Berth's back (a host reinstalled, its state gone: another
   * incarnation at the same address), so maintenance inspects its ready allocations too and records them lost.
   */
  readonly replaceable?: boolean;
  /**
   * How a workspace's writable view reaches a command: `directory`, the host directory itself is bound per command
   * (executions carry its `source`); `materialized`, the view lives in the allocation (a staging volume made with it,
   * shown at WORKSPACE_TARGET) and the runtime fills and captures it through `fileHost`; `none`, executions are never
   * handed a WorkspaceView.
   */
  readonly workspaceView: 'directory' | 'materialized' | 'none';
  /**
   * The allocation's materialized view (workspaceView `materialized`). Throws `unavailable` when the allocation or
   * its view is not there (removed, or not mounted because its container does not run), `workspace_unavailable`
   * (detail.reason) when this provider's views cannot be reached from this host.
   */
  fileHost?(ref: AllocationRef): Promise<FileHost>;
  /**
   * Who must own workspace files so its commands can write them (native, root server: the sandbox identity); absent:
   * the server's own uid.
   */
  readonly workspaceOwner?: { uid: number; gid: number };
  /**
   * What this provider's contained host commands run as and must not see (native: the sandbox identity; the data
   * dir, tokens, host credentials, engine socket, workspace roots). Builds on the host's toolchain run under the same.
   */
  readonly hostSandbox?: HostSandbox;
  /**
   * Warm pools (src/runtime/pools): allocations made ahead of need for a pool's profile, handed to an environment
   * whose profile fits it. Providers without it are never pooled.
   */
  readonly pooling?: PoolingCapability;
  /**
   * Whether the provider's backend answers (Docker daemon ping); false makes the environment `unavailable`. With a
   * profile: the backend that serves it (`backendOf`).
   */
  available(profile?: Profile): Promise<boolean>;
  /** Which of its backends serves `profile` (remote: the host it names), so availability is asked per backend. */
  backendOf?(profile: Profile): string;
  close?(): Promise<void>;
}

/** How a provider hands a pooled allocation to an environment (Provider.pooling). */
export interface PoolingCapability {
  /** Whether an allocation made for `pool` can serve `wanted` once personalized: what only a new one could change is equal. */
  fits(pool: Profile, wanted: Profile): boolean;
  /**
   * Checks the allocation still runs as recorded and applies `wanted`'s limits in place where they differ. `gone`
   * when it does not run as recorded (nothing applied: reconcile it and take another); `cold` when `withContent`
   * and it cannot take a content version (nothing applied: it stays pooled, this acquire goes cold); throws when it
   * cannot tell.
   */
  personalize(ref: AllocationRef, wanted: Profile, withContent: boolean): Promise<'ready' | 'gone' | 'cold'>;
  /**
   * Shows `version` (the environment's content version) to the claimed allocation's commands exactly and read-only
   * at `version.target`, in place of whatever an earlier, interrupted apply left. Run only once the claim is
   * durable, so it never fills an allocation another environment holds. Throws when it cannot.
   */
  applyContent(ref: AllocationRef, version: ReadOnlyMount): Promise<void>;
}

/** What `Provider.versionedCommand` composes from. */
export interface VersionedCommandSpec {
  command: string[];
  cwd?: string;
  /** The command's variables before the version's (its provider's base and the caller's). */
  env: Record<string, string>;
  profile: Profile;
  /** The version directory and where the command sees it (/env/<slug>). */
  version: ReadOnlyMount;
  /** Host paths the command must not see even where it sees the host (Berth's data directory). */
  hidden: string[];
  /** The workspace the command runs in (ExecSpec.workspace): a wrapper that changes directory starts there. */
  workspace?: WorkspaceView;
}

export interface VersionedCommand {
  command: string[];
  env: Record<string, string>;
  /** Read-only mounts the executor makes for this command (providers that bind versions per command). */
  mounts?: ReadOnlyMount[];
}

/** What `Provider.admit` judges of an execution: its cwd, the read-only mounts it will get and its workspace. */
export interface Admission {
  cwd?: string;
  mounts?: ReadOnlyMount[];
  workspace?: WorkspaceView;
}

/** Where a contained command sees its workspace. */
export const WORKSPACE_TARGET = '/workspace';
/** The name under the workspace root where a WorkspaceView's `inputs` are shown read-only. */
export const WORKSPACE_INPUTS_NAME = '.berth-inputs';

/**
 * The writable view of a workspace an execution runs in (a shell command in a turn). For a `materialized` view
 * (Provider.workspaceView) the view is the allocation's own: `source` is unused (the runtime passes ''), `cwd` is
 * relative under WORKSPACE_TARGET, and `inputs` is not supported (ignored: nothing is shown at .berth-inputs).
 */
export interface WorkspaceView {
  /** `directory` views: the workspace directory on this host, canonical, checked by the runtime just before (its identity matches). */
  source: string;
  /** The working directory, RELATIVE to the workspace root ('' = the root); already confined by the runtime (no `..`, no link). */
  cwd: string;
  /**
   * `directory` views: a Berth-owned host directory shown READ-ONLY at <workspace>/.berth-inputs (staged inputs);
   * absent: none. It lives outside the workspace so the command cannot swap it for a link.
   */
  inputs?: string;
  /**
   * Names directly under the root the command must not see (['.berth']): covered by an empty tmpfs. A materialized
   * view never holds them (the file host neither writes nor captures PRIVATE_ROOT_NAMES).
   */
  hidden: string[];
}

/** A read-only directory shown to the command at `target` (the active content version at /env/<slug>). */
export interface ReadOnlyMount {
  source: string;
  target: string;
}

export interface ExecSpec {
  operationId: string;
  /** argv; a string command is run as ['/bin/sh', '-c', command] by the caller. */
  command: string[];
  cwd?: string;
  /** The workspace the command runs in (then `cwd` is absent: `workspace.cwd` says where). */
  workspace?: WorkspaceView;
  /** The command's whole environment: callers pass a filtered one, nothing of Berth's own leaks in. */
  env: Record<string, string>;
  stdin: boolean;
  pty?: { cols: number; rows: number };
  timeoutMs?: number;
  mounts?: ReadOnlyMount[];
  /**
   * How long submit may wait for a command that started to exit, so a quick one is answered `exited` by the submit
   * itself (one look instead of two). Honoured by executors that say `settles`; others answer `running` at once.
   */
  settleMs?: number;
}

/** What the executor's on-disk receipt proves about an operation. */
export interface Receipt {
  protocolVersion: 1;
  operationId: string;
  /** absent: no receipt and the operation can never start now; running; exited: status known, output complete. */
  state: 'absent' | 'running' | 'exited';
  pid?: number;
  exitCode?: number | null;
  signal?: string | null;
  cancelled?: boolean;
  timedOut?: boolean;
  /** Why the command never started (e.g. `cwd`: no such directory); exitCode and signal are then null. */
  error?: string;
  startedAt?: string;
  exitedAt?: string;
  /** Bytes written so far per stream. */
  sizes?: Partial<Record<OutputStream, number>>;
}

/** A file held open for a copy by path: `path` names the open descriptor (this process only), valid until `close`. */
export interface HeldFile {
  path: string;
  close(): void;
}

export interface OutputChunk {
  data: Buffer;
  /** Cursor after `data`. */
  next: number;
  /** True once the stream is closed and every byte up to `next` is final. */
  closed: boolean;
}

export interface Executor {
  readonly protocolVersion: 1;
  /** Whether submit honours ExecSpec.settleMs. */
  readonly settles?: boolean;
  /** Idempotent per operationId: an operation with any receipt is never started again. */
  submit(spec: ExecSpec): Promise<Receipt>;
  /** Reads the receipt; 'absent' when none exists (yet). */
  status(operationId: string): Promise<Receipt>;
  /**
   * Recovery only: if the operation has no receipt, fence it so a submit still in flight can never start it, and
   * say absent; if a receipt won the race, return it. Never starts anything.
   */
  abandon(operationId: string): Promise<Receipt>;
  /**
   * Bytes of `stream` from `cursor`, at most `maxBytes`. With `into`, they may be read into it (at most its length),
   * `data` then being a view of it, so a reader can reuse its buffers; an executor is free to ignore it.
   */
  read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number, into?: Buffer): Promise<OutputChunk>;
  /**
   * `stream`'s spool file held open on this host, when this process can read it directly (so its bytes can be
   * copied without `read`): `path` names the open regular file itself (never a link the command put there) until
   * `close`. Undefined when the spool is reached some other way. Only the drained size counts: a stray writer may
   * append past it.
   */
  spoolFile?(operationId: string, stream: OutputStream): Promise<HeldFile | undefined>;
  /**
   * Resolves when the receipt or output changes, or after `timeoutMs`. A follower that passes its cursors (`since`)
   * is woken exactly: as soon as a stream holds bytes past its cursor, or the receipt exists.
   */
  waitForChange(operationId: string, timeoutMs: number, since?: Partial<Record<OutputStream, number>>): Promise<void>;
  writeStdin(operationId: string, bytes: Buffer): Promise<void>;
  endStdin(operationId: string): Promise<void>;
  resize(operationId: string, cols: number, rows: number): Promise<void>;
  /** Kills the whole process tree; resolves once the executor confirms it is gone. */
  cancel(operationId: string): Promise<Receipt>;
  /** Drops the spool once output is saved elsewhere. */
  release(operationId: string): Promise<void>;
}

/** A host-side sandbox's view (native/sandbox-view.ts): who runs in it, what it hides, and a way opened to a directory. */
export interface HostSandbox {
  readonly identity: SandboxIdentity;
  /** What bwrap covers (an empty directory or /dev/null over each). */
  hidingTargets(): string[];
  /** Makes `dir` reachable by the identity (the data dir's path to it searchable). */
  reach(dir: string): void;
}

export interface BuildContainerOptions {
  buildId: string;
  environmentId: string;
  profile: Profile;
  /** Host directories bound WRITABLE (the version being built, at the path executions will see it). */
  binds: Array<{ source: string; target: string }>;
}

export interface BuildStep {
  argv: string[];
  /** A path inside the container. */
  cwd: string;
  env: Record<string, string>;
  onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  timeoutMs?: number;
}

export interface BuildStepExit {
  exitCode: number | null;
  /** Why the step never ran (its program is not in the image, the container is gone). */
  error?: string;
  timedOut?: boolean;
}

/** A running build container: its image's PATH, its steps, and its removal. */
export interface BuildContainerHandle {
  readonly path: string;
  run(step: BuildStep): Promise<BuildStepExit>;
  remove(): Promise<void>;
}
