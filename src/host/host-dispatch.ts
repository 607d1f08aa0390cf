/**
 * The host's side of every protocol call: the target is fenced first (its host incarnation, its allocation's
 * request identity and generation), and only then is the provider its profile's backend names (native, or the
 * host's Docker engine) or its executor asked. Receipts leave without their pid: a remote PID means nothing on the
 * control plane and must never reach its kill paths.
 */
import type http from 'node:http';
import { hostname } from 'node:os';
import { BerthError } from '../../schemas/errors.ts';
import type { ExecCall, HostTarget } from '../../schemas/host-protocol.ts';
import type { Profile } from '../../schemas/profile.ts';
import { commandEnv } from '../providers/command-env.ts';
import type { FileHost } from '../providers/file-host.ts';
import { backendOf, hostedIdentity, hostedProfile, type HostBackend } from '../providers/remote/hosted.ts';
import type { AllocationRef, AllocationReport, ExecSpec, Executor, PhysicalIdentity, Provider, Receipt } from '../providers/provider.ts';
import type { HostAllocations, AllocationRecord } from './host-allocations.ts';
import { followOperation } from './host-follow.ts';
import { streamOutput } from './host-stream.ts';
import type { ReplayLog } from './replay-limits.ts';
import type { HostViews } from './host-views.ts';

/** The longest a waitForChange is held open (the client asks again). */
const MAX_WAIT_MS = 30_000;

const stale = (reason: string, detail: Record<string, unknown>) =>
  new BerthError('stale_target', `The host refuses the call: ${reason.replaceAll('_', ' ')}.`, { reason, ...detail });

export class HostDispatch {
  constructor(
    private readonly providers: Partial<Record<HostBackend, Provider>>,
    private readonly allocations: HostAllocations,
    private readonly views: HostViews,
    private readonly log: ReplayLog,
  ) {}

  /** The backends this host serves (told in its hello). */
  get backends(): HostBackend[] {
    return Object.keys(this.providers) as HostBackend[];
  }

  /** The provider a remote profile's backend names, or `environment_invalid` when this host does not serve it. */
  private provider(profile: Profile): Provider {
    const backend = backendOf(profile);
    const provider = this.providers[backend];
    if (!provider) {
      throw new BerthError('environment_invalid', `This host does not serve the ${backend} backend (it serves ${this.backends.join(', ')}).`, { reason: 'backend_not_served', backend, backends: this.backends });
    }
    return provider;
  }

  private identity(): PhysicalIdentity {
    return hostedIdentity(hostname(), this.allocations.incarnation);
  }

  private refOf(record: AllocationRecord): AllocationRef {
    const { requestId, allocationId, environmentId, generation } = record.target;
    return { requestId, allocationId, environmentId, generation, ...(record.identity ? { identity: record.identity } : {}) };
  }

  /** The backend's report as the control plane records it: the host's identity (its incarnation fences the rest). */
  private hosted(report: AllocationReport): AllocationReport {
    if (report.status === 'ready') return { status: 'ready', identity: this.identity() };
    if (report.status === 'fenced') return { status: 'fenced', identity: this.identity(), reason: report.reason };
    if (report.status === 'pending') return { status: 'pending', reason: report.reason };
    return report;
  }

  /** Refuses a target of an older generation than the environment's newest, or of another allocation's identity. */
  private fenceGeneration(target: HostTarget, record?: AllocationRecord): void {
    const newest = this.allocations.newestGeneration(target.environmentId);
    if (target.generation < newest) throw stale('stale_generation', { generation: target.generation, newest });
    if (record && (record.target.requestId !== target.requestId || record.target.environmentId !== target.environmentId || record.target.generation !== target.generation)) {
      throw stale('not_this_allocation', { allocationId: target.allocationId });
    }
  }

  private fenceIncarnation(target: HostTarget): void {
    if (target.incarnation !== this.allocations.incarnation) {
      throw stale('foreign_incarnation', { incarnation: target.incarnation ?? null, host: this.allocations.incarnation });
    }
  }

  async allocate(target: HostTarget, profile: Profile): Promise<AllocationReport> {
    const record = this.allocations.get(target.allocationId);
    this.fenceGeneration(target, record);
    const provider = this.provider(profile);
    const { incarnation: _i, ...kept } = target;
    if (!record) this.allocations.put({ target: kept, profile });
    this.views.prepare(provider, target.allocationId);
    const report = await provider.allocate({ ...this.refOf({ target: kept, profile }), generation: target.generation, profile: hostedProfile(profile) });
    // The backend's own identity (a container's incarnation) is what later calls reach and fence it by.
    if (report.status === 'ready') this.allocations.put({ target: kept, profile, identity: report.identity });
    return this.hosted(report);
  }

  async inspect(target: HostTarget): Promise<AllocationReport> {
    const record = this.allocations.get(target.allocationId);
    if (!record || record.target.requestId !== target.requestId) return { status: 'absent' };
    if (target.incarnation !== undefined && target.incarnation !== this.allocations.incarnation) {
      return { status: 'fenced', identity: this.identity(), reason: 'the host is another incarnation than the one recorded' };
    }
    return this.hosted(await this.provider(record.profile).inspect(this.refOf(record)));
  }

  async deallocate(target: HostTarget): Promise<'terminated' | 'unknown'> {
    const record = this.allocations.get(target.allocationId);
    if (!record) return 'terminated';
    this.fenceIncarnation(target);
    this.fenceGeneration(target, record);
    const provider = this.provider(record.profile);
    const result = await provider.deallocate(this.refOf(record));
    // Kept while the backend cannot confirm, so the control plane's retry finds the allocation again.
    if (result === 'terminated') {
      this.views.remove(provider, target.allocationId);
      this.allocations.delete(target.allocationId);
    }
    return result;
  }

  /** A fenced target's record and provider: every executor and file host call passes here before it is dispatched. */
  private fenced(target: HostTarget): { record: AllocationRecord; provider: Provider } {
    this.fenceIncarnation(target);
    const record = this.allocations.get(target.allocationId);
    if (!record) throw new BerthError('not_found', 'This host has no such allocation.', { allocationId: target.allocationId });
    this.fenceGeneration(target, record);
    return { record, provider: this.provider(record.profile) };
  }

  /** The allocation's workspace view, to capture or fill (src/host/host-files.ts). */
  fileHost(target: HostTarget): Promise<FileHost> {
    const { record, provider } = this.fenced(target);
    return this.views.fileHost(provider, this.refOf(record));
  }

  /** The executor of a fenced target. */
  executor(target: HostTarget): Executor {
    const { record, provider } = this.fenced(target);
    return provider.executor(this.refOf(record), hostedProfile(record.profile));
  }

  /**
   * The command as the host's provider runs it: the host's own base variables under the caller's where its provider
   * takes them from the host (its PATH and account, not the control plane's), the allocation's view as its
   * workspace, and the provider's admission checks (a contained cwd, a workspace cwd) made here as well.
   */
  async submit(call: ExecCall<'submit'>): Promise<Receipt> {
    const { record, provider } = this.fenced(call.target);
    const profile = hostedProfile(record.profile);
    const { workspace: wire, ...rest } = call.spec;
    const env = provider.commandBase === 'host' ? commandEnv({ env: rest.env, pty: rest.pty !== undefined }) : rest.env;
    const spec: ExecSpec = { ...rest, env, ...(wire ? { workspace: this.views.view(provider, record.target.allocationId, wire) } : {}) };
    await provider.admit?.({ ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}), ...(spec.workspace ? { workspace: spec.workspace } : {}) }, profile);
    return withoutPid(await provider.executor(this.refOf(record), profile).submit(spec));
  }

  async status(call: ExecCall<'status'>): Promise<Receipt> {
    return withoutPid(await this.executor(call.target).status(call.operationId));
  }

  async abandon(call: ExecCall<'abandon'>): Promise<Receipt> {
    return withoutPid(await this.executor(call.target).abandon(call.operationId));
  }

  async cancel(call: ExecCall<'cancel'>): Promise<Receipt> {
    return withoutPid(await this.executor(call.target).cancel(call.operationId));
  }

  read(call: ExecCall<'read'>) {
    return this.executor(call.target).read(call.operationId, call.stream, call.cursor, call.maxBytes);
  }

  waitForChange(call: ExecCall<'waitForChange'>): Promise<void> {
    return this.executor(call.target).waitForChange(call.operationId, Math.min(call.timeoutMs, MAX_WAIT_MS), call.since);
  }

  stdin(call: ExecCall<'stdin'>): Promise<void> {
    return this.executor(call.target).writeStdin(call.operationId, Buffer.from(call.data, 'base64'));
  }

  endStdin(call: ExecCall<'endStdin'>): Promise<void> {
    return this.executor(call.target).endStdin(call.operationId);
  }

  resize(call: ExecCall<'resize'>): Promise<void> {
    return this.executor(call.target).resize(call.operationId, call.cols, call.rows);
  }

  release(call: ExecCall<'release'>): Promise<void> {
    return this.executor(call.target).release(call.operationId);
  }

  follow(call: ExecCall<'follow'>, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const cursors = { stdout: 0, stderr: 0, pty: 0, ...call.cursors };
    return followOperation(this.executor(call.target), call.operationId, cursors, req, res, withoutPid, this.log);
  }

  stream(call: ExecCall<'stream'>, res: http.ServerResponse): Promise<void> {
    return streamOutput(this.executor(call.target), call.operationId, call.stream, call.cursor, res, this.log);
  }
}

export function withoutPid(receipt: Receipt): Receipt {
  const { pid: _pid, ...rest } = receipt;
  return rest;
}
