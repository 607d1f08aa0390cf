/**
 * The Executor of an allocation on an Execution Host: each call is one protocol call naming the allocation's target
 * (its generation and the host incarnation it was made on), fenced by the host before dispatch. While the host does
 * not answer every call throws (`unavailable`): callers keep the execution as it is and ask again, so nothing is
 * exited by guess or resubmitted (a submit is idempotent per operationId on the host's spool).
 */
import { z } from 'zod';
import type { OutputStream } from '../../../schemas/output.ts';
import { MAX_READ_BYTES, wireReceiptSchema, type ExecOp, type HostTarget } from '../../../schemas/host-protocol.ts';
import { BerthError } from '../../../schemas/errors.ts';
import type { ExecSpec, Executor, OutputChunk, Receipt } from '../provider.ts';
import type { HostClient } from './host-client.ts';

const nothing = z.null();
/** Stdin bytes per call: 1 MiB is 1.4 MiB of base64, well inside the protocol's bound of a call. */
const STDIN_CALL_BYTES = 1 << 20;
/** How long past its own timeout a waitForChange may take to come back. */
const WAIT_MARGIN_MS = 5_000;

export class RemoteExecutor implements Executor {
  readonly protocolVersion = 1 as const;
  /** The host's executors honour settleMs. */
  readonly settles = true;

  constructor(
    private readonly client: HostClient,
    private readonly target: HostTarget,
  ) {}

  private exec<S extends z.ZodType>(op: ExecOp, body: Record<string, unknown>, schema: S, timeoutMs?: number): Promise<z.infer<S>> {
    return this.client.call(`/v1/exec/${op}`, { target: this.target, ...body }, schema, timeoutMs);
  }

  private receipt(op: ExecOp, operationId: string): Promise<Receipt> {
    return this.exec(op, { operationId }, wireReceiptSchema);
  }

  async submit(spec: ExecSpec): Promise<Receipt> {
    // Read-only version mounts are host paths of the control plane: they do not exist there.
    if (spec.mounts?.length) {
      throw new BerthError('invalid_request', 'A remote host runs commands without content versions (not served yet).', { reason: 'remote_unsupported' });
    }
    const { operationId, command, cwd, env, stdin, pty, timeoutMs, settleMs, workspace } = spec;
    const wire = {
      operationId,
      command,
      env,
      stdin,
      ...(cwd !== undefined ? { cwd } : {}),
      ...(pty ? { pty } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(settleMs !== undefined ? { settleMs } : {}),
      // The view is the allocation's own on the host (materialized): only where the command starts and what it must not see.
      ...(workspace ? { workspace: { cwd: workspace.cwd, hidden: workspace.hidden } } : {}),
    };
    return this.exec('submit', { spec: wire }, wireReceiptSchema);
  }

  status(operationId: string): Promise<Receipt> {
    return this.receipt('status', operationId);
  }

  abandon(operationId: string): Promise<Receipt> {
    return this.receipt('abandon', operationId);
  }

  cancel(operationId: string): Promise<Receipt> {
    return this.receipt('cancel', operationId);
  }

  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number, into?: Buffer): Promise<OutputChunk> {
    // At most `into`'s length, so the answer is received straight into it.
    const bound = Math.min(maxBytes ?? MAX_READ_BYTES, into?.length ?? MAX_READ_BYTES, MAX_READ_BYTES);
    return this.client.bytes('/v1/exec/read', { target: this.target, operationId, stream, cursor, maxBytes: bound }, into);
  }

  async waitForChange(operationId: string, timeoutMs: number, since?: Partial<Record<OutputStream, number>>): Promise<void> {
    const wait = Math.min(timeoutMs, 30_000);
    await this.exec('waitForChange', { operationId, timeoutMs: wait, ...(since ? { since } : {}) }, nothing, wait + WAIT_MARGIN_MS);
  }

  /** In calls of at most STDIN_CALL_BYTES, in order (the protocol bounds a call's body). */
  async writeStdin(operationId: string, bytes: Buffer): Promise<void> {
    let at = 0;
    do {
      await this.exec('stdin', { operationId, data: bytes.subarray(at, at + STDIN_CALL_BYTES).toString('base64') }, nothing);
      at += STDIN_CALL_BYTES;
    } while (at < bytes.length);
  }

  async endStdin(operationId: string): Promise<void> {
    await this.exec('endStdin', { operationId }, nothing);
  }

  async resize(operationId: string, cols: number, rows: number): Promise<void> {
    await this.exec('resize', { operationId, cols, rows }, nothing);
  }

  async release(operationId: string): Promise<void> {
    await this.exec('release', { operationId }, nothing);
  }
}
