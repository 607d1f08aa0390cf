/**
 * The execution actor type: executor calls as effects (DESIGN §5–7). Submission happens only from the
 * `execution.dispatched` transition; recovery inspects receipts (abandoning what has none), reattaches, drains and
 * saves, and never submits again. Executors address an operation by the execution id (unique per scope and
 * operationId, and always a valid spool name), never by the caller's operationId alone.
 */
import { executionEvents } from '../../../schemas/events/execution.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { outputStreams, type OutputStream } from '../../../schemas/output.ts';
import { defineActor, type DomainEvent, type EffectContext } from '../../actors/actor-type.ts';
import {
  executionMachine,
  finished,
  type CheckpointParams,
  reject,
  type OperationParams,
  type SaveParams,
  type SubmitParams,
  type UseParams,
  type WatchParams,
} from '../../machines/execution.machine.ts';
import { commandEnv, DEFAULT_TERM } from '../../providers/command-env.ts';
import type { Executor, Provider, Receipt, VersionedCommand, WorkspaceView } from '../../providers/provider.ts';
import type { ArtifactRef, ArtifactStore } from '../../store/artifact-store.ts';
import type { AllocationContext } from '../../machines/allocation.machine.ts';
import type { Services } from '../services.ts';
import { versionedExec } from './version-exec.ts';

const ms = (iso: string | undefined, fallback: number): number => (iso ? Date.parse(iso) : fallback);

/** The events a receipt proves, for an execution that was dispatched. */
const fromReceipt = (r: Receipt, now: number): DomainEvent => {
  if (r.state === 'absent') return { type: 'execution.unknown', reason: r.error ?? 'no executor receipt exists for the operation', at: now };
  if (r.state === 'running') return startedEvent(r, now);
  return exitedEvent(r, now);
};

const startedEvent = (r: Receipt, now: number): DomainEvent => ({
  type: 'execution.started',
  ...(r.pid ? { pid: r.pid } : {}),
  at: ms(r.startedAt, now),
});

const exitedEvent = (r: Receipt, now: number): DomainEvent => ({
  type: 'execution.exited',
  exitCode: r.exitCode ?? null,
  signal: r.signal ?? null,
  ...(r.cancelled ? { cancelled: true } : {}),
  ...(r.timedOut ? { timedOut: true } : {}),
  at: ms(r.exitedAt, now),
});

/** A spool receipt is written once the process tree is gone and every writer closed: exited also proves drained. */
const drainedEvent = (r: Receipt, now: number): DomainEvent => ({ type: 'execution.drained', sizes: r.sizes ?? {}, at: now });

/**
 * How long a submit waits for a command that was just started to exit (the executor's settleMs, else a look after
 * it), so a quick one reports started, exited and drained in one append instead of three. A longer command reports
 * `started` this much later.
 */
const FAST_EXIT_MS = 15;

/**
 * What a submit reports from its receipt: started (at once when the command reads stdin or owns a terminal, since
 * those wait for a client; else after up to FAST_EXIT_MS), the whole run when it is already over, or failed when
 * the command could not start. A run that wrote no byte at all has nothing to copy: its streams are the empty
 * artifact, so it is saved in the same append.
 */
async function submitted(executor: Executor, services: Services, p: SubmitParams, receipt: Receipt, settled: boolean): Promise<DomainEvent[]> {
  const { now } = services;
  // An executor that honoured settleMs has waited already; one that answered at once gets the wait here.
  if (receipt.state === 'running' && !p.stdin && !p.pty && !settled) {
    // Empty cursors: woken by the receipt only, not by output.
    await executor.waitForChange(p.executionId, FAST_EXIT_MS, {}).catch(() => undefined);
    // Only an exit is taken from this look: anything else (an owner that exited between the look's reads looks
    // absent) is left to the watch, which asks again.
    const after = await executor.status(p.executionId).catch(() => undefined);
    if (after?.state === 'exited') receipt = after;
  }
  if (receipt.state !== 'exited') return [fromReceipt(receipt, now())];
  const at = now();
  if (receipt.error) return [{ type: 'execution.failed', code: 'invalid_request', message: `the command could not start: ${receipt.error}`, at }];
  return [...(receipt.startedAt ? [startedEvent(receipt, at)] : []), ...(await exitedRun(executor, services, p.executionId, receipt, at))];
}

/**
 * What an exited receipt proves, as one append: the exit, the drain (the receipt is written once the process tree is
 * gone and every writer closed), and the save when the run wrote nothing (nothing to copy).
 */
async function exitedRun(executor: Executor, services: Services, executionId: string, receipt: Receipt, at: number): Promise<DomainEvent[]> {
  const run = [exitedEvent(receipt, at), drainedEvent(receipt, at)];
  const { sizes } = receipt;
  const silent = sizes !== undefined && Object.values(sizes).every((n) => n === 0);
  return silent ? [...run, await savedEvent(executor, services, executionId, sizes)] : run;
}

/** One promise per shutdown signal (a single listener), however many effects wait on it. */
const stopping = new WeakMap<AbortSignal, Promise<void>>();
function stopped(signal: AbortSignal): Promise<void> {
  let p = stopping.get(signal);
  if (!p) {
    p = new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    stopping.set(signal, p);
  }
  return p;
}

/** Resolves after `ms`, or earlier when the runtime stops. */
async function pause(signal: AbortSignal, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([stopped(signal), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * Asks the executor until it answers: a failing call (engine hiccup) is retried with backoff, never reported, since
 * only a receipt may decide an outcome. Undefined when the runtime stops first (recovery asks again).
 */
async function answered<T>(call: () => Promise<T>, shutdown: AbortSignal): Promise<T | undefined> {
  for (let backoff = 100; !shutdown.aborted; backoff = Math.min(backoff * 2, 5_000)) {
    try {
      return await call();
    } catch {
      await pause(shutdown, backoff);
    }
  }
  return undefined;
}

/**
 * Follows the receipt until it proves an outcome: exited (for a spool executor that also means drained: the receipt
 * is written once the process tree is gone and every writer closed), or absent (its owner is gone and left no
 * receipt: nothing can prove what happened). Absent is asked twice, since an owner may write its receipt and exit
 * between a reader's two looks. Undefined when the runtime stops first; recovery reattaches.
 */
async function waitOutcome(executor: Executor, operationId: string, shutdown: AbortSignal): Promise<Receipt | undefined> {
  const outcome = await followRunning(executor, operationId, shutdown);
  return outcome && 'receipt' in outcome ? outcome.receipt : undefined;
}

/**
 * waitOutcome, also stopping early with `{written}` once a running command's streams together hold more than
 * `outputLimit` bytes. The wait then watches each stream at its size plus the bytes left (one stream passing it
 * proves the sum did), so a command writing one stream is caught at the first look past the limit; writes split
 * over several streams are caught at the next look (at most a second).
 */
async function followRunning(
  executor: Executor,
  operationId: string,
  shutdown: AbortSignal,
  outputLimit?: number,
): Promise<{ receipt: Receipt } | { written: number } | undefined> {
  let absent = 0;
  for (;;) {
    const r = await answered(() => executor.status(operationId), shutdown);
    if (!r) return undefined;
    if (r.state === 'exited') return { receipt: r };
    if (r.state === 'absent') {
      if (++absent >= 2) return { receipt: r };
      await pause(shutdown, 50);
      continue;
    }
    absent = 0;
    // Without a limit no cursors: woken by the receipt alone (or the timeout, to look at the owner again), not by
    // every write of a command that streams, which made this loop look at the operation once per write.
    let cursors: Partial<Record<OutputStream, number>> = {};
    if (outputLimit !== undefined) {
      const sizes = r.sizes ?? {};
      const written = outputStreams.reduce((sum, s) => sum + (sizes[s] ?? 0), 0);
      if (written > outputLimit) return { written };
      cursors = Object.fromEntries(outputStreams.map((s) => [s, (sizes[s] ?? 0) + outputLimit - written]));
    }
    await Promise.race([executor.waitForChange(operationId, 1_000, cursors).catch(() => pause(shutdown, 100)), stopped(shutdown)]);
  }
}

/** Recovery of a dispatched operation: fence it if nothing claimed it, else read what its receipt proves. */
async function inspectReceipt(executor: Executor, operationId: string, shutdown: AbortSignal): Promise<Receipt | undefined> {
  const r = await answered(() => executor.abandon(operationId), shutdown);
  // An absent answer from a claimed operation may be a look between its receipt and its owner's exit: confirm it.
  return r?.state === 'absent' ? answered(() => executor.status(operationId), shutdown) : r;
}

/**
 * The command's whole environment: the caller's variables over the target's base, nothing of the runtime's own.
 * The host's minimal base (command-env.ts), or none where the exec adds the image's own (its PATH, HOME).
 */
function commandEnvFor(base: Provider['commandBase'], p: SubmitParams): Record<string, string> {
  if (base === 'host') return commandEnv({ env: p.env, pty: p.pty !== undefined });
  return { ...(p.pty ? { TERM: DEFAULT_TERM } : {}), ...p.env };
}

const SAVE_CHUNK = 4 * 1024 * 1024;
const EMPTY_DIGEST = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

async function* spooled(executor: Executor, operationId: string, stream: OutputStream, size: number) {
  let cursor = 0;
  // One buffer for every read: the artifact store has written a chunk before it asks for the next, and a new buffer
  // per read (256 MiB of output: 64 of them) would cost major garbage collections while clients stream.
  const buffer = Buffer.allocUnsafe(Math.min(SAVE_CHUNK, size));
  while (cursor < size) {
    const chunk = await executor.read(operationId, stream, cursor, Math.min(SAVE_CHUNK, size - cursor), buffer);
    if (chunk.data.length === 0) throw new Error(`${stream} of ${operationId} ended at ${cursor} of ${size} bytes`);
    yield chunk.data;
    cursor = chunk.next;
  }
}

/**
 * From this size on, a stream whose spool is a file on this host is copied and hashed off the main thread (256 MiB
 * is hundreds of ms of hashing, which every follower and request would wait behind); a smaller one is hashed here
 * (at most a millisecond), so it never queues behind a large copy.
 */
const OFF_THREAD_BYTES = 1024 * 1024;

async function savedStream(executor: Executor, services: Services, operationId: string, stream: OutputStream, size: number) {
  const { artifacts } = services;
  // A large copy waits for live followers still behind to catch up (they would share a core with it).
  if (size >= OFF_THREAD_BYTES) await services.liveReaders.caughtUp(operationId, stream, size, services.shutdown);
  const file = size >= OFF_THREAD_BYTES ? await executor.spoolFile?.(operationId, stream) : undefined;
  if (!file) return artifacts.putChunks(spooled(executor, operationId, stream, size));
  try {
    return await artifacts.putFilePrefix(file.path, size);
  } finally {
    file.close();
  }
}

/** Artifact stores this process has seen holding the empty artifact (artifacts are immutable, never removed). */
const holdsEmpty = new WeakSet<ArtifactStore>();

/** An empty stream is one shared artifact: published once, then known (no write, no fsync, no look). */
async function emptyArtifact(artifacts: ArtifactStore): Promise<ArtifactRef> {
  const ref = { digest: EMPTY_DIGEST, size: 0 };
  if (!holdsEmpty.has(artifacts) && !(await artifacts.has(ref))) await artifacts.putBytes(Buffer.alloc(0));
  holdsEmpty.add(artifacts);
  return ref;
}

/** Copies each stream's spool (up to its drained size) into the artifact store; a terminal that said nothing is left out. */
async function savedEvent(executor: Executor, services: Services, executionId: string, sizes: SaveParams['sizes']) {
  const saved: Partial<Record<OutputStream, ArtifactRef>> = {};
  for (const stream of outputStreams) {
    const size = sizes[stream];
    if (size === undefined || (size === 0 && stream === 'pty')) continue;
    saved[stream] = size === 0 ? await emptyArtifact(services.artifacts) : await savedStream(executor, services, executionId, stream, size);
  }
  return { type: 'execution.saved', artifacts: saved, at: services.now() };
}

/**
 * Holds the execution's use on its allocation (idempotent per use id; nothing is written when it is held already)
 * and answers the allocation, or the `execution.failed` to report when the allocation refuses the use.
 */
async function holdUse(p: UseParams, ctx: EffectContext<Services>): Promise<{ allocation: AllocationContext } | { failed: DomainEvent }> {
  try {
    const allocation = await ctx.services.allocation(p.allocationId);
    if (!Object.hasOwn(allocation.uses, p.useId)) {
      await ctx.send('allocation', p.allocationId, { type: 'allocation.use_acquired', useId: p.useId, kind: p.kind, at: ctx.services.now() });
    }
    return { allocation };
  } catch (e) {
    if (!isBerthError(e)) throw e;
    // The target is not a live allocation any more (released, failed, never existed): refused before any submit.
    const code = e.code === 'invalid_state' || e.code === 'not_found' ? 'stale_target' : e.code;
    return { failed: { type: 'execution.failed', code, message: e.message, at: ctx.services.now() } };
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
      // Dispatched in the same append (execution-service.ts): the submit takes the use.
      if (ctx.cause.followedBy?.includes('execution.dispatched')) return undefined;
      const held = await holdUse(p, ctx);
      return 'failed' in held ? held.failed : { type: 'execution.dispatched', at: ctx.services.now() };
    },
    'allocation.unuse': async (p: UseParams, ctx) => {
      // Given back alongside `released` (one group commit, not two in a row). A refusal means it is not held any
      // more (or the allocation is gone); a use this leaves held, maintenance gives back (release-orphaned-uses).
      void ctx.send('allocation', p.allocationId, { type: 'allocation.use_released', useId: p.useId, at: ctx.services.now() }).catch(() => undefined);
      return { type: 'execution.released', at: ctx.services.now() };
    },
    'executor.submit': async (p: SubmitParams, ctx) => {
      // Nothing runs without its use: usually taken with the acceptance, else here (or refused before any submit).
      const held = await holdUse({ allocationId: p.target.allocationId, useId: p.executionId, kind: 'execution' }, ctx);
      if ('failed' in held) return held.failed;
      let executor: Executor;
      let env: Record<string, string>;
      let version: VersionedCommand | undefined;
      let workspace: WorkspaceView | undefined;
      try {
        executor = await ctx.services.executorFor(p.target.allocationId);
        const { profile } = held.allocation;
        env = commandEnvFor(ctx.services.providers.get(profile.provider).commandBase, p);
        // The content version it reads: mounted read-only at /env/<slug>, with its PATH (version-exec.ts).
        // A turn's shell command: its workspace's view, checked again now (a root replaced meanwhile fails it).
        if (p.workspace) {
          workspace =
            p.workspace.mountGeneration === undefined
              ? await ctx.services.workspaces.view(p.workspace.workspaceId, p.workspace.cwd)
              : await ctx.services.mounts.view(p.workspace.workspaceId, p.workspace.mountGeneration, p.target.allocationId, p.workspace.cwd);
        }
        if (p.version !== undefined) version = await versionedExec(ctx.services, { ...p, version: p.version }, profile, env, workspace);
      } catch (e) {
        // Nothing was sent, so no receipt can exist: the command could not start.
        if (!isBerthError(e)) throw e;
        return { type: 'execution.failed', code: e.code, message: e.message, at: ctx.services.now() };
      }
      let receipt: Receipt;
      try {
        receipt = await executor.submit({
          operationId: p.executionId,
          command: version?.command ?? p.command,
          ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
          env: version?.env ?? env,
          ...(version?.mounts ? { mounts: version.mounts } : {}),
          ...(workspace ? { workspace } : {}),
          stdin: p.stdin,
          ...(p.pty ? { pty: p.pty } : {}),
          ...(p.timeoutMs !== undefined ? { timeoutMs: p.timeoutMs } : {}),
          ...(p.stdin || p.pty ? {} : { settleMs: FAST_EXIT_MS }),
        });
      } catch (e) {
        // The submit's outcome is uncertain: only the receipt can tell, and abandoning fences a late start.
        const inspected = await inspectReceipt(executor, p.executionId, ctx.services.shutdown);
        if (!inspected) return undefined;
        // A typed refusal and no receipt behind the fence: it never ran and never will, for the reason given (not
        // `unknown`, which would keep a turn's storage held for a command that provably did not start).
        if (inspected.state === 'absent' && isBerthError(e)) return { type: 'execution.failed', code: e.code, message: e.message, at: ctx.services.now() };
        receipt = inspected;
      }
      return submitted(executor, ctx.services, p, receipt, executor.settles === true);
    },
    'mount.checkpoint': (p: CheckpointParams, ctx) => ctx.services.mounts.checkpointExecution(p),
    'executor.inspect': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const receipt = await inspectReceipt(executor, p.executionId, ctx.services.shutdown);
      return receipt && fromReceipt(receipt, ctx.services.now());
    },
    'executor.watch': async (p: WatchParams, ctx) => {
      // Appended together with the exit (a quick command): nothing left to watch.
      if (ctx.cause.followedBy?.includes('execution.exited')) return undefined;
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const outcome = await followRunning(executor, p.executionId, ctx.services.shutdown, p.outputLimitBytes);
      if (!outcome) return undefined;
      if ('written' in outcome) return { type: 'execution.output_exceeded', written: outcome.written, limit: p.outputLimitBytes!, at: ctx.services.now() };
      const { receipt } = outcome;
      // The exit with its drain (and its save when silent): one append instead of three.
      if (receipt.state === 'exited' && !receipt.error) return exitedRun(executor, ctx.services, p.executionId, receipt, ctx.services.now());
      return fromReceipt(receipt, ctx.services.now());
    },
    'executor.cancel': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      await executor.cancel(p.executionId);
      return { type: 'execution.cancel_confirmed', at: ctx.services.now() };
    },
    'executor.drain': async (p: OperationParams, ctx) => {
      if (ctx.cause.followedBy?.includes('execution.drained')) return undefined;
      const executor = await ctx.services.executorFor(p.target.allocationId);
      const receipt = await waitOutcome(executor, p.executionId, ctx.services.shutdown);
      // Absent after an exit: the spool is gone before its output was saved. Nothing is reported; maintenance asks
      // again, and the execution stays unsaved rather than saved without its output.
      if (receipt?.state !== 'exited') return undefined;
      return drainedEvent(receipt, ctx.services.now());
    },
    'output.save': async (p: SaveParams, ctx) => {
      if (ctx.cause.followedBy?.includes('execution.saved')) return undefined;
      const executor = await ctx.services.executorFor(p.target.allocationId);
      return savedEvent(executor, ctx.services, p.executionId, p.sizes);
    },
    'executor.release': async (p: OperationParams, ctx) => {
      const executor = await ctx.services.executorFor(p.target.allocationId);
      await executor.release(p.executionId);
    },
  },
});
