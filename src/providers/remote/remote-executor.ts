/**
 * The Executor of an allocation on an Execution Host: each call is one protocol call naming the allocation's target
 * (its generation and the host incarnation it was made on), fenced by the host before dispatch. While the host does
 * not answer every call throws (`unavailable`): callers keep the execution as it is and ask again, so nothing is
 * exited by guess or resubmitted (a submit is idempotent per operationId on the host's spool).
 */
import { z } from 'zod';
import type { OutputStream } from '../../../schemas/output.ts';
import { MAX_READ_BYTES, wireReceiptSchema, type ExecOp, type HostTarget } from '../../../schemas/host-protocol.ts';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { ExecSpec, Executor, OutputChunk, Receipt } from '../provider.ts';
import type { HostClient } from './host-client.ts';
import { OutputTail } from './output-tail.ts';

const nothing = z.null();
/** Stdin bytes per call: 1 MiB is 1.4 MiB of base64, well inside the protocol's bound of a call. */
const STDIN_CALL_BYTES = 1 << 20;
/** How long past its own timeout a waitForChange may take to come back. */
const WAIT_MARGIN_MS = 5_000;

export class RemoteExecutor implements Executor {
  readonly protocolVersion = 1 as const;
  /** The host's executors honour settleMs. */
  readonly settles = true;

  /** Streams read ahead, by `<operationId> <stream>`: opened once a read found a stream still being written. */
  private readonly tails = new Map<string, OutputTail>();

  constructor(
    private readonly client: HostClient,
    private readonly target: HostTarget,
  ) {}

  private exec<S extends z.ZodType>(op: ExecOp, body: Record<string, unknown>, schema: S, timeoutMs?: number): Promise<z.infer<S>> {
    return this.client.call(`/v1/exec/${op}`, { target: this.target, ...body }, schema, timeoutMs);
  }

  /**
   * A receipt call. A host that refuses the target as another incarnation's was replaced (its data directory, spools
   * and receipts gone): the operation has no receipt and none can ever appear, so it is `absent`, never a guess.
   */
  private async receipt(op: ExecOp, operationId: string): Promise<Receipt> {
    try {
      return await this.exec(op, { operationId }, wireReceiptSchema);
    } catch (e) {
      if (!isBerthError(e, 'stale_target') || e.detail.reason !== 'foreign_incarnation') throw e;
      return { protocolVersion: 1, operationId, state: 'absent', error: `the host ${this.client.config.name} was replaced (another incarnation): its receipt is gone` };
    }
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

  /**
   * From the stream's tail when one is open at `cursor`; else one plain read, and a tail opened after it when the
   * stream had bytes and is still being written (a follower's next reads then cost no request).
   */
  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number, into?: Buffer): Promise<OutputChunk> {
    // At most `into`'s length, so the answer is received straight into it.
    const bound = Math.min(maxBytes ?? MAX_READ_BYTES, into?.length ?? MAX_READ_BYTES, MAX_READ_BYTES);
    const key = `${operationId} ${stream}`;
    const tail = this.tails.get(key);
    if (tail?.serves(cursor)) return tail.take(bound, into);
    if (tail?.dead) tail.close();
    const chunk = await this.client.bytes('/v1/exec/read', { target: this.target, operationId, stream, cursor, maxBytes: bound }, into);
    if (chunk.data.length > 0 && !chunk.closed && !this.tails.has(key)) {
      const call = { target: this.target, operationId, stream, cursor: chunk.next };
      this.tails.set(key, new OutputTail(chunk.next, (sink) => this.client.stream('/v1/exec/stream', call, sink), () => this.tails.delete(key)));
    }
    return chunk;
  }

  /** Waited on the tails alone when every stream named is followed by one at its cursor; else asked of the host. */
  async waitForChange(operationId: string, timeoutMs: number, since?: Partial<Record<OutputStream, number>>): Promise<void> {
    const named = since ? Object.entries(since).filter(([, cursor]) => cursor !== undefined) : [];
    const tails = named.map(([stream, cursor]) => {
      const tail = this.tails.get(`${operationId} ${stream}`);
      return tail?.serves(cursor!) ? tail : undefined;
    });
    if (named.length > 0 && tails.every(Boolean)) {
      await Promise.race(tails.map((tail) => tail!.changed(timeoutMs)));
      return;
    }
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
    for (const [key, tail] of this.tails) if (key.startsWith(`${operationId} `)) tail.close();
    await this.exec('release', { operationId }, nothing);
  }
}
