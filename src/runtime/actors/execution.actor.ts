/**
 * The execution actor type: executor calls as effects (DESIGN §5–7). Submission happens only from the
 * `execution.dispatched` transition; recovery inspects receipts (abandoning what has none), reattaches, drains and
 * saves, and never submits again.
 */
import { executionEvents } from '../../../schemas/events/execution.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { defineActor, type DomainEvent } from '../../actors/actor-type.ts';
import {
  executionMachine,
  finished,
  reject,
  type OperationParams,
  type SaveParams,
  type SubmitParams,
  type UseParams,
} from '../../machines/execution.machine.ts';
import type { Executor, OutputStream, Receipt } from '../../providers/provider.ts';
import type { Services } from '../services.ts';

const ms = (iso: string | undefined, fallback: number): number => (iso ? Date.parse(iso) : fallback);

/** The events a receipt proves, for an execution that was dispatched. */
const fromReceipt = (r: Receipt, now: number): DomainEvent[] => {
  if (r.state === 'absent') return [{ type: 'execution.unknown', reason: r.error ?? 'no executor receipt exists for the operation', at: now }];
  if (r.state === 'running') return [{ type: 'execution.started', ...(r.pid ? { pid: r.pid } : {}), at: ms(r.startedAt, now) }];
  return [exitedEvent(r, now)];
};

const exitedEvent = (r: Receipt, now: number): DomainEvent => ({
  type: 'execution.exited',
  exitCode: r.exitCode ?? null,
  signal: r.signal ?? null,
  ...(r.cancelled ? { cancelled: true } : {}),
  ...(r.timedOut ? { timedOut: true } : {}),
  at: ms(r.exitedAt, now),
});

/** Waits for the receipt to say exited; resolves undefined when the runtime shuts down first (recovery reattaches). */
async function waitExited(executor: Executor, operationId: string, shutdown: AbortSignal): Promise<Receipt | undefined> {
  for (;;) {
    const r = await executor.status(operationId);
    if (r.state === 'exited') return r;
    if (shutdown.aborted) return undefined;
    await Promise.race([
      executor.waitForChange(operationId, 1_000),
      new Promise((resolve) => shutdown.addEventListener('abort', resolve, { once: true })),
    ]);
  }
}

const STREAMS: OutputStream[] = ['stdout', 'stderr', 'pty'];
const SAVE_CHUNK = 4 * 1024 * 1024;

async function* spooled(executor: Executor, operationId: string, stream: OutputStream, size: number) {
  let cursor = 0;
  while (cursor < size) {
    const chunk = await executor.read(operationId, stream, cursor, Math.min(SAVE_CHUNK, size - cursor));
    if (chunk.data.length === 0) throw new Error(`${stream} of ${operationId} ended at ${cursor} of ${size} bytes`);
    yield chunk.data;
    cursor = chunk.next;
  }
}

export const executionActor = defineActor<typeof executionMachine, Services>({
  type: 'execution',
  machine: executionMachine,
  input: (id) => ({ id }),
  events: executionEvents,
  finished,
  reject,
  effects: {
    'allocation.use': async (p: UseParams, ctx) => {
      const at = ctx.services.now();
      try {
        await ctx.send('allocation', p.allocationId, { type: 'allocation.use_acquired', useId: p.useId, kind: p.kind, at });
        return { type: 'execution.dispatched', at: ctx.services.now() };
      } catch (e) {
        if (!isBerthError(e)) throw e;
        const code = e.code === 'invalid_state' || e.code === 'not_found' ? 'stale_target' : e.code;
        return { type: 'execution.failed', code, message: e.message, at: ctx.services.now() };
      }
    },
    'allocation.unuse': async (p: UseParams, ctx) => {
      try {
        await ctx.send('allocation', p.allocationId, { type: 'allocation.use_released', useId: p.useId, at: ctx.services.now() });
      } catch (e) {
        // Not held any more (or the allocation is gone): the use is given back either way.
        if (!isBerthError(e)) throw e;
      }
      return { type: 'execution.released', at: ctx.services.now() };
    },
    'executor.submit': async (p: SubmitParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      let receipt: Receipt;
      try {
        receipt = await executor.submit({
          operationId: p.operationId,
          command: p.command,
          ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
          env: p.env,
          stdin: p.stdin,
          ...(p.pty ? { pty: p.pty } : {}),
          ...(p.timeoutMs !== undefined ? { timeoutMs: p.timeoutMs } : {}),
        });
      } catch {
        // The submit's outcome is uncertain: only the receipt can tell, and abandoning fences a late start.
        receipt = await executor.abandon(p.operationId);
      }
      if (receipt.state === 'exited' && receipt.error) {
        return { type: 'execution.failed', code: 'invalid_request', message: receipt.error, at: ctx.services.now() };
      }
      return fromReceipt(receipt, ctx.services.now());
    },
    'executor.inspect': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      return fromReceipt(await executor.abandon(p.operationId), ctx.services.now());
    },
    'executor.watch': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const receipt = await waitExited(executor, p.operationId, ctx.services.shutdown);
      return receipt ? exitedEvent(receipt, ctx.services.now()) : undefined;
    },
    'executor.cancel': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      await executor.cancel(p.operationId);
      return { type: 'execution.cancel_confirmed', at: ctx.services.now() };
    },
    'executor.drain': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const receipt = await waitExited(executor, p.operationId, ctx.services.shutdown);
      if (!receipt) return undefined;
      return { type: 'execution.drained', sizes: receipt.sizes ?? {}, at: ctx.services.now() };
    },
    'output.save': async (p: SaveParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const artifacts: Record<string, { digest: string; size: number }> = {};
      for (const stream of STREAMS) {
        const size = p.sizes[stream as keyof typeof p.sizes];
        if (size === undefined || (size === 0 && stream === 'pty')) continue;
        artifacts[stream] = await ctx.services.artifacts.putChunks(spooled(executor, p.operationId, stream, size));
      }
      return { type: 'execution.saved', artifacts, at: ctx.services.now() };
    },
    'executor.release': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      await executor.release(p.operationId);
    },
  },
});
