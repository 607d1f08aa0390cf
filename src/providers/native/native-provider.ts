/**
 * The native provider: the borrowed host itself. Allocating creates the allocation's spool directory under the data
 * dir and, for a contained profile with limits, its control group (allocation-limits.ts); deallocating never touches
 * the host (it only drops that directory and that group when they are empty).
 */
import { mkdir, rmdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { Logger } from 'pino';
import type { Profile } from '../../../schemas/profile.ts';
import type { Admission, AllocationIntent, AllocationRef, AllocationReport, Executor, PhysicalIdentity, Provider } from '../provider.ts';
import { isSpoolName } from '../spool.ts';
import { AllocationLimits, limitsOf, type CommandLimits } from './allocation-limits.ts';
import { NativeExecutor } from './native-executor.ts';
import { dropSandboxSpares } from './supervisor-launcher.ts';
import { sandboxIdentity, type SandboxIdentity } from './sandbox-identity.ts';
import { SandboxView } from './sandbox-view.ts';
import { workspaceCwd } from '../workspace-view.ts';
import { versionedOnHost } from './versioned-command.ts';

export interface NativeProviderOptions {
  dataDir: string;
  /** Between SIGTERM and SIGKILL when a command is cancelled or times out. */
  graceMs?: number;
  /** Further host paths contained commands must not see (the tokens file). The data dir is always hidden. */
  hidden?: string[];
  /** Who contained commands run as (default: from BERTH_SANDBOX_UID/GID, see sandbox-identity.ts). */
  identity?: SandboxIdentity;
  /** Told once when contained commands cannot get their profile's limits in full (no writable cgroup hierarchy). */
  logger?: Pick<Logger, 'warn'>;
}

export class NativeProvider implements Provider {
  readonly kind = 'native' as const;
  readonly ownership = 'borrowed' as const;
  readonly commandBase = 'host' as const;
  /** Shared per scope (seed 000): the host is one place anyway. */
  readonly defaultReuse = 'scope' as const;
  readonly contentBinding = 'command' as const;
  readonly versionedCommand = versionedOnHost;
  /** The workspace is bound into the sandbox per command (contained), or is the cwd on the host (uncontained). */
  readonly workspaceView = 'directory' as const;

  private readonly dataDir: string;
  private readonly executors = new Map<string, NativeExecutor>();
  /** What contained commands see: one for the provider, shared by its executors (and host-side builds). */
  readonly hostSandbox: SandboxView;
  /** Memory, CPU and pids limits of contained commands: one control group per allocation. */
  readonly limits: AllocationLimits;

  constructor(private readonly options: NativeProviderOptions) {
    this.dataDir = resolve(options.dataDir);
    this.hostSandbox = new SandboxView(options.identity ?? sandboxIdentity(), [this.dataDir, ...(options.hidden ?? [])]);
    this.limits = new AllocationLimits(this.dataDir);
    // Groups of an earlier run that nothing holds any more; one still holding commands stays.
    this.limits.sweep();
    if (this.limits.mode !== 'cgroup-v1' && this.limits.mode !== 'cgroup-v2') {
      const bounds = this.limits.mode === 'rlimit' ? 'each process\'s data size and the sandbox user\'s process count (rlimits)' : 'nothing';
      options.logger?.warn({ mode: this.limits.mode }, `no writable cgroup hierarchy: native limits bound ${bounds}, not an allocation's memory, CPU and pids as a whole`);
    } else if (this.limits.missing.length > 0) {
      options.logger?.warn({ mode: this.limits.mode, missing: this.limits.missing }, 'native limits: these cgroup controllers are not available, their limits are not applied');
    }
  }

  /** A root server's contained commands run as the sandbox identity: workspace files must be its to write. */
  get workspaceOwner(): { uid: number; gid: number } | undefined {
    const { uid, gid, drops } = this.hostSandbox.identity;
    return drops ? { uid, gid } : undefined;
  }

  /**
   * A contained execution's cwd must lie in what its sandbox shows (sandbox-view.ts); uncontained ones run as the host.
   * With a workspace, the cwd is the workspace's (confined by the runtime) and a cwd of its own is refused.
   */
  admit(admission: Admission, profile: Profile): void {
    if (admission.workspace) workspaceCwd(admission.workspace, admission.cwd);
    else if (profile.contain) this.hostSandbox.confine(admission.cwd, admission.mounts);
  }

  private spoolDir(allocationId: string): string {
    if (!isSpoolName(allocationId)) {
      throw new BerthError('invalid_request', 'An allocation id must be usable as a directory name.', { allocationId });
    }
    return join(this.dataDir, 'spool', allocationId);
  }

  private identity(): PhysicalIdentity {
    return { provider: 'native', resourceId: hostname() };
  }

  async allocate(intent: AllocationIntent): Promise<AllocationReport> {
    await mkdir(this.spoolDir(intent.allocationId), { recursive: true });
    this.ensureGroup(intent.allocationId, intent.profile);
    return { status: 'ready', identity: this.identity() };
  }

  /**
   * The allocation's group with its profile's limits, made or found again (idempotent). Contained profiles only: an
   * uncontained one is the borrowed host (an admin's, trusted) and stays unlimited, as its commands run as the server.
   */
  private ensureGroup(allocationId: string, profile: Profile): CommandLimits | undefined {
    const limits = profile.contain ? limitsOf(profile) : undefined;
    if (limits) this.limits.ensure(allocationId, limits);
    return limits;
  }

  async inspect(_ref: AllocationRef): Promise<AllocationReport> {
    return { status: 'ready', identity: this.identity() };
  }

  async deallocate(ref: AllocationRef): Promise<'terminated' | 'unknown'> {
    this.executors.get(ref.allocationId)?.close();
    this.executors.delete(ref.allocationId);
    // Its spare sandbox waits in its spool directory and its group: both go before they are removed.
    await dropSandboxSpares(this.spoolDir(ref.allocationId));
    try {
      await rmdir(this.spoolDir(ref.allocationId));
    } catch {
      // Not empty (spools not yet released) or already gone: the host itself is never destroyed either way.
    }
    await this.limits.remove(ref.allocationId);
    return 'terminated';
  }

  /** One executor per allocation: it holds caches (open output files, receipts) that several callers share. */
  executor(ref: AllocationRef, profile: Profile): Executor {
    let executor = this.executors.get(ref.allocationId);
    if (!executor) {
      const spoolDir = this.spoolDir(ref.allocationId);
      // Found again after a restart, whose sweep removed it if it was empty then.
      const limits = this.ensureGroup(ref.allocationId, profile);
      const limitPrefix = limits ? this.limits.prefix(ref.allocationId, limits) : [];
      executor = new NativeExecutor({ spoolDir, profile, view: this.hostSandbox, graceMs: this.options.graceMs, limitPrefix });
      this.executors.set(ref.allocationId, executor);
    }
    return executor;
  }

  async available(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    for (const executor of this.executors.values()) executor.close();
    this.executors.clear();
    this.limits.close();
  }
}
