/**
 * The native provider: the borrowed host itself. Allocating creates nothing but the allocation's spool directory
 * under the data dir; deallocating never touches the host (it only drops that directory when it is empty).
 */
import { mkdir, rmdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import type { Admission, AllocationIntent, AllocationRef, AllocationReport, Executor, PhysicalIdentity, Provider } from '../provider.ts';
import { isSpoolName } from '../spool.ts';
import { NativeExecutor } from './native-executor.ts';
import { sandboxIdentity, type SandboxIdentity } from './sandbox-identity.ts';
import { SandboxView } from './sandbox-view.ts';

export interface NativeProviderOptions {
  dataDir: string;
  /** Between SIGTERM and SIGKILL when a command is cancelled or times out. */
  graceMs?: number;
  /** Further host paths contained commands must not see (the tokens file). The data dir is always hidden. */
  hidden?: string[];
  /** Who contained commands run as (default: from BERTH_SANDBOX_UID/GID, see sandbox-identity.ts). */
  identity?: SandboxIdentity;
}

export class NativeProvider implements Provider {
  readonly kind = 'native' as const;
  readonly ownership = 'borrowed' as const;

  private readonly dataDir: string;
  private readonly executors = new Map<string, NativeExecutor>();
  /** What contained commands see: one for the provider, shared by its executors. */
  readonly view: SandboxView;

  constructor(private readonly options: NativeProviderOptions) {
    this.dataDir = resolve(options.dataDir);
    this.view = new SandboxView(options.identity ?? sandboxIdentity(), [this.dataDir, ...(options.hidden ?? [])]);
  }

  /** A contained execution's cwd must lie in what its sandbox shows (sandbox-view.ts); uncontained ones run as the host. */
  admit(admission: Admission, profile: Profile): void {
    if (profile.contain) this.view.confine(admission.cwd, admission.mounts);
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
    return { status: 'ready', identity: this.identity() };
  }

  async inspect(_ref: AllocationRef): Promise<AllocationReport> {
    return { status: 'ready', identity: this.identity() };
  }

  async deallocate(ref: AllocationRef): Promise<'terminated' | 'unknown'> {
    this.executors.get(ref.allocationId)?.close();
    this.executors.delete(ref.allocationId);
    try {
      await rmdir(this.spoolDir(ref.allocationId));
    } catch {
      // Not empty (spools not yet released) or already gone: the host itself is never destroyed either way.
    }
    return 'terminated';
  }

  /** One executor per allocation: it holds caches (open output files, receipts) that several callers share. */
  executor(ref: AllocationRef, profile: Profile): Executor {
    let executor = this.executors.get(ref.allocationId);
    if (!executor) {
      const spoolDir = this.spoolDir(ref.allocationId);
      executor = new NativeExecutor({ spoolDir, profile, view: this.view, graceMs: this.options.graceMs });
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
  }
}
