/**
 * The host's side of every protocol call: the target is fenced first (its host incarnation, its allocation's
 * request identity and generation), and only then is the native provider or its executor asked. Receipts leave
 * without their pid: a remote PID means nothing on the control plane and must never reach its kill paths.
 */
import type http from 'node:http';
import { hostname } from 'node:os';
import { BerthError } from '../../schemas/errors.ts';
import type { ExecCall, HostTarget } from '../../schemas/host-protocol.ts';
import type { Profile } from '../../schemas/profile.ts';
import { hostedIdentity, hostedProfile } from '../providers/remote/hosted.ts';
import type { NativeProvider } from '../providers/native/native-provider.ts';
import type { AllocationRef, AllocationReport, Executor, PhysicalIdentity, Receipt } from '../providers/provider.ts';
import type { HostAllocations, AllocationRecord } from './host-allocations.ts';
import { followOperation } from './host-follow.ts';

/** The longest a waitForChange is held open (the client asks again). */
const MAX_WAIT_MS = 30_000;

const stale = (reason: string, detail: Record<string, unknown>) =>
  new BerthError('stale_target', `The host refuses the call: ${reason.replaceAll('_', ' ')}.`, { reason, ...detail });

export class HostDispatch {
  constructor(
    private readonly native: NativeProvider,
    private readonly allocations: HostAllocations,
  ) {}

  private identity(): PhysicalIdentity {
    return hostedIdentity(hostname(), this.allocations.incarnation);
  }

  private refOf(record: AllocationRecord): AllocationRef {
    const { requestId, allocationId, environmentId } = record.target;
    return { requestId, allocationId, environmentId };
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
    const { incarnation: _i, ...kept } = target;
    if (!record) this.allocations.put({ target: kept, profile });
    const report = await this.native.allocate({ ...this.refOf({ target: kept, profile }), generation: target.generation, profile: hostedProfile(profile) });
    return report.status === 'ready' ? { status: 'ready', identity: this.identity() } : report;
  }

  async inspect(target: HostTarget): Promise<AllocationReport> {
    const record = this.allocations.get(target.allocationId);
    if (!record || record.target.requestId !== target.requestId) return { status: 'absent' };
    if (target.incarnation !== undefined && target.incarnation !== this.allocations.incarnation) {
      return { status: 'fenced', identity: this.identity(), reason: 'the host is another incarnation than the one recorded' };
    }
    return { status: 'ready', identity: this.identity() };
  }

  async deallocate(target: HostTarget): Promise<'terminated' | 'unknown'> {
    const record = this.allocations.get(target.allocationId);
    if (!record) return 'terminated';
    this.fenceIncarnation(target);
    this.fenceGeneration(target, record);
    const result = await this.native.deallocate(this.refOf(record));
    this.allocations.delete(target.allocationId);
    return result;
  }

  /** The executor of a fenced target: every executor call passes here before it is dispatched. */
  executor(target: HostTarget): Executor {
    this.fenceIncarnation(target);
    const record = this.allocations.get(target.allocationId);
    if (!record) throw new BerthError('not_found', 'This host has no such allocation.', { allocationId: target.allocationId });
    this.fenceGeneration(target, record);
    return this.native.executor(this.refOf(record), hostedProfile(record.profile));
  }

  async submit(call: ExecCall<'submit'>): Promise<Receipt> {
    return withoutPid(await this.executor(call.target).submit(call.spec));
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
    return followOperation(this.executor(call.target), call.operationId, cursors, req, res, withoutPid);
  }
}

function withoutPid(receipt: Receipt): Receipt {
  const { pid: _pid, ...rest } = receipt;
  return rest;
}
