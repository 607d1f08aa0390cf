/**
 * The execution actor (stream `execution-<id>`): one command on one allocation target (DESIGN §5).
 *
 *   accepted ─dispatched→ dispatched ─started→ running ─exited→ exited
 *            ─drained→ [checkpointing ─checkpointed→] drained ─saved→ saved ─released→ released ─compacted→ compacted
 *
 * with `closing` for outcomes that have nothing to save (cancelled before dispatch, failed, unknown): it only gives
 * the allocation use back. Every step's effect is named by the transition into it and reports back as the next event.
 * `released` is finished (nothing left to reconcile) but not final: retention may still compact it. A compacted
 * stream starts with `execution.compacted` (the events before it are gone), so `pristine` takes it too.
 *
 * Rules encoded here:
 * - the operation (id, input digest, target) is persisted before anything is sent, and `execution.dispatched` is
 *   persisted before `executor.submit`: an execution still `accepted` after a crash was never submitted. The
 *   runtime's submission appends accepted and dispatched in one write (with the allocation use in the same group
 *   commit; the submit effect takes the use itself if that one was refused): one commit fewer before the command
 *   starts, at the price that a crash in that moment ends `unknown` instead of running the command on recovery;
 *   `accepted` alone (taking the use, then dispatching) stays for callers that append it by itself;
 * - recovery never submits: `dispatched` is inspected (abandon-if-absent), `running` re-watched, `exited` drained,
 *   `drained` saved, `saved` released; a missing receipt makes the outcome `unknown`, never a second run;
 * - cancellation is persisted before it is sent and needs the executor's confirmation; before dispatch it cancels
 *   without running; while the submit is in flight it is sent once the receipt says running.
 * - one stream per operation: the caller derives the execution id from the operationId, so a second
 *   `execution.accepted` is refused. `reject` says `operation_conflict` when its inputDigest differs, else
 *   `invalid_state` with `detail.reason = 'already_accepted'`: the caller then returns the existing execution.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { ExecutionEvent, Target } from '../../schemas/events/execution.ts';
import type { ExecutionStatus } from '../../schemas/states.ts';
import { effect } from './effect.ts';
import { viewOf, type MachineView } from './machine-view.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

type Accepted = Extract<ExecutionEvent, { type: 'execution.accepted' }>;
type Exited = Extract<ExecutionEvent, { type: 'execution.exited' }>;
type Saved = Extract<ExecutionEvent, { type: 'execution.saved' }>;
type Drained = Extract<ExecutionEvent, { type: 'execution.drained' }>;
type OutputExceeded = Extract<ExecutionEvent, { type: 'execution.output_exceeded' }>;
type Compacted = Extract<ExecutionEvent, { type: 'execution.compacted' }>;
type Checkpointed = Extract<ExecutionEvent, { type: 'execution.checkpointed' }>;

/** The failure an execution stopped for writing past its output quota records (status `cancelled`). */
export const outputExceededFailure = (e: Pick<OutputExceeded, 'written' | 'limit'>): { code: string; message: string } => ({
  code: 'quota_exceeded',
  message: `The command wrote ${e.written} bytes, past its output quota of ${e.limit} bytes: it was stopped.`,
});

/** The failure a cancel the server made records (the first failure stays). */
const stoppedFor = (context: ExecutionContext, event: ExecutionEvent) =>
  event.type === 'execution.cancel_requested' && event.failure && context.failure === null ? { failure: event.failure } : {};

export interface ExecutionContext extends Omit<Accepted, 'type' | 'at'> {
  id: string;
  pid: number | null;
  startedAt: number | null;
  exit: Omit<Exited, 'type'> | null;
  sizes: Drained['sizes'] | null;
  artifacts: Saved['artifacts'] | null;
  /** none → requested (persisted, then sent) → confirmed (the executor says the process tree is gone). */
  cancel: 'none' | 'requested' | 'confirmed';
  /** An outcome reached without an exit: cancelled before dispatch, could not start, or not provable. */
  outcome: 'cancelled' | 'failed' | 'unknown' | null;
  failure: { code: string; message: string } | null;
  /** The checkpoint of the view it wrote (a mounted workspace view only). */
  checkpoint: Omit<Checkpointed, 'type'> | null;
  /** Set once retention compacted the stream: the output is no longer kept (removed, or moved to the archive). */
  retention: { output: Compacted['output']; at: number } | null;
  createdAt: number;
  updatedAt: number;
}

/** Every executor effect addresses the operation on its target. */
export interface OperationParams {
  executionId: string;
  operationId: string;
  target: Target;
}

/**
 * `executor.submit`: hold the allocation use first (taking it if the one sent with the acceptance was refused; a
 * refusal reports `execution.failed`, stale_target, and nothing is submitted); build the ExecSpec (adding the active version's read-only mount, PATH and PROJECT_ROOT from
 * `version`) and submit it; report `execution.started` or `execution.exited` from the receipt, `execution.failed`
 * when the executor refused before any receipt (stale generation, protocol mismatch). If the outcome of the call is
 * uncertain, do what `executor.inspect` does; never submit twice.
 */
export interface SubmitParams extends OperationParams, Pick<Accepted, 'command' | 'cwd' | 'stdin' | 'pty' | 'timeoutMs' | 'version' | 'workspace'> {
  env: Record<string, string>;
}

/**
 * `output.save`: copy each stream's spool (up to `sizes`) into the artifact store; report `execution.saved`
 * {artifacts}. A failed save retries the save (recovery), never the command.
 */
export interface SaveParams extends OperationParams {
  sizes: Drained['sizes'];
}

/**
 * `allocation.use`: send `allocation.use_acquired` {useId, kind: 'execution'} to the allocation (idempotent per
 * useId); on success report `execution.dispatched`, on rejection `execution.failed` with the rejection's code
 * (stale_target, environment_busy, ...).
 * `allocation.unuse`: send `allocation.use_released` {useId} (a `not_held` rejection counts as done); report
 * `execution.released`.
 */
export interface UseParams {
  allocationId: string;
  useId: string;
  kind: 'execution';
}

const operation = ({ context }: { context: ExecutionContext }): OperationParams => ({
  executionId: context.id,
  operationId: context.operationId,
  target: context.target,
});

const useParams = ({ context }: { context: ExecutionContext }): UseParams => ({
  allocationId: context.target.allocationId,
  useId: context.id,
  kind: 'execution',
});

const use = { type: 'allocation.use', params: useParams } as const;
const unuse = { type: 'allocation.unuse', params: useParams } as const;
const submit = {
  type: 'executor.submit',
  params: ({ context }: { context: ExecutionContext }): SubmitParams => ({
    ...operation({ context }),
    command: context.command,
    ...(context.cwd !== undefined ? { cwd: context.cwd } : {}),
    env: context.env ?? {},
    stdin: context.stdin,
    ...(context.pty ? { pty: context.pty } : {}),
    ...(context.timeoutMs !== undefined ? { timeoutMs: context.timeoutMs } : {}),
    ...(context.version !== undefined ? { version: context.version } : {}),
    ...(context.workspace ? { workspace: context.workspace } : {}),
  }),
} as const;
/**
 * Recovery of `dispatched`: `executor.abandon` (fences a submit still in flight), then report from the receipt:
 * running → `execution.started`, exited → `execution.exited`, absent → `execution.unknown`.
 */
const inspect = { type: 'executor.inspect', params: operation } as const;
/**
 * `executor.watch`: follow the receipt (waitForChange, status) until it says exited; report `execution.exited`. Also
 * reattaches. With `outputLimitBytes`, report `execution.output_exceeded` as soon as the streams together hold more.
 */
export interface WatchParams extends OperationParams {
  outputLimitBytes?: number;
}
const watch = {
  type: 'executor.watch',
  params: ({ context }: { context: ExecutionContext }): WatchParams => ({
    ...operation({ context }),
    // Once it was stopped for its output, the watch only waits for the exit.
    ...(context.outputLimitBytes !== undefined && context.failure === null ? { outputLimitBytes: context.outputLimitBytes } : {}),
  }),
} as const;
/**
 * `executor.cancel` (idempotent, kills the tree); report `execution.cancel_confirmed`, and `execution.exited` when
 * the receipt says so.
 */
const cancel = { type: 'executor.cancel', params: operation } as const;
/** Wait until the process tree is gone and every stream is closed; report `execution.drained` {sizes}. */
const drain = { type: 'executor.drain', params: operation } as const;
const save = {
  type: 'output.save',
  params: ({ context }: { context: ExecutionContext }): SaveParams => ({
    ...operation({ context }),
    sizes: context.sizes ?? {},
  }),
} as const;
/**
 * `mount.checkpoint`: checkpoint the workspace view the execution wrote (its attempt is the execution's own, so a
 * recovered runtime resumes the same one); report `execution.checkpointed` with its outcome. Never runs the command.
 */
export interface CheckpointParams {
  executionId: string;
  workspaceId: string;
  mountGeneration: number;
}
const checkpoint = {
  type: 'mount.checkpoint',
  params: ({ context }: { context: ExecutionContext }): CheckpointParams => ({
    executionId: context.id,
    workspaceId: context.workspace!.workspaceId,
    mountGeneration: context.workspace!.mountGeneration!,
  }),
} as const;
/** `executor.release`: drop the spool, output being saved; idempotent. */
const release = { type: 'executor.release', params: operation } as const;

export const executionMachine = setup({
  types: {
    context: {} as ExecutionContext,
    events: {} as ExecutionEvent,
    input: {} as { id: string },
  },
  guards: {
    cancelRequested: ({ context }) => context.cancel === 'requested',
    cancelNotRequested: ({ context }) => context.cancel === 'none',
    writesMount: ({ context }) => context.workspace?.mountGeneration !== undefined,
  },
  actions: {
    'allocation.use': effect<UseParams>(),
    'allocation.unuse': effect<UseParams>(),
    'executor.submit': effect<SubmitParams>(),
    'executor.inspect': effect<OperationParams>(),
    'executor.watch': effect<WatchParams>(),
    'executor.cancel': effect<OperationParams>(),
    'executor.drain': effect<OperationParams>(),
    'output.save': effect<SaveParams>(),
    'mount.checkpoint': effect<CheckpointParams>(),
    'executor.release': effect<OperationParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    accept: assign(({ event }) => {
      if (event.type !== 'execution.accepted') return {};
      const { type: _type, at, ...operation } = event;
      return { ...operation, createdAt: at };
    }),
    start: assign(({ event }) => (event.type === 'execution.started' ? { pid: event.pid ?? null, startedAt: event.at } : {})),
    exit: assign(({ event }) => {
      if (event.type !== 'execution.exited') return {};
      const { type: _type, ...exit } = event;
      return { exit };
    }),
    recordSizes: assign(({ event }) => (event.type === 'execution.drained' ? { sizes: event.sizes } : {})),
    recordCheckpoint: assign(({ event }) => {
      if (event.type !== 'execution.checkpointed') return {};
      const { type: _type, ...result } = event;
      return { checkpoint: result };
    }),
    recordArtifacts: assign(({ event }) => (event.type === 'execution.saved' ? { artifacts: event.artifacts } : {})),
    requestCancel: assign(({ context, event }) => ({ cancel: 'requested' as const, ...stoppedFor(context, event) })),
    exceedOutput: assign(({ event }) => (event.type === 'execution.output_exceeded' ? { failure: outputExceededFailure(event) } : {})),
    confirmCancel: assign({ cancel: 'confirmed' }),
    /** Nothing was sent, so nothing can run: the cancel is complete without the executor. */
    cancelBeforeDispatch: assign(({ context, event }) => ({ cancel: 'confirmed' as const, outcome: 'cancelled' as const, ...stoppedFor(context, event) })),
    fail: assign(({ event }) =>
      event.type === 'execution.failed'
        ? { outcome: 'failed' as const, failure: { code: event.code, message: event.message } }
        : {},
    ),
    compact: assign(({ event }) =>
      event.type === 'execution.compacted' ? { retention: { output: event.output, at: event.at } } : {},
    ),
    /** A compacted stream's first event: the record comes back from the summary. */
    restore: assign(({ event }) => (event.type === 'execution.compacted' ? contextOfSummary(event) : {})),
    markUnknown: assign(({ event }) =>
      event.type === 'execution.unknown'
        ? { outcome: 'unknown' as const, failure: { code: 'unknown', message: event.reason } }
        : {},
    ),
  },
}).createMachine({
  id: 'execution',
  context: ({ input }) => ({
    id: input.id,
    operationId: '',
    inputDigest: '',
    environmentId: '',
    target: { environmentId: '', allocationId: '', generation: 0 },
    command: [],
    stdin: false,
    scope: '',
    pid: null,
    startedAt: null,
    exit: null,
    sizes: null,
    artifacts: null,
    cancel: 'none',
    outcome: null,
    failure: null,
    checkpoint: null,
    retention: null,
    createdAt: 0,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: {
        'execution.accepted': { target: 'accepted', actions: ['accept', 'stamp', use] },
        'execution.compacted': { target: 'compacted', actions: ['restore', 'compact', 'stamp'] },
      },
    },
    /** Persisted, never submitted. Recovery may take the use again (idempotent) and so reach dispatch. */
    accepted: {
      on: {
        'execution.dispatched': { target: 'dispatched', actions: ['stamp', submit] },
        'execution.cancel_requested': { target: 'closing', actions: ['cancelBeforeDispatch', 'stamp', unuse] },
        'execution.failed': { target: 'closing', actions: ['fail', 'stamp', unuse] },
        'runtime.recovered': { actions: use },
      },
    },
    /** Submit sent (or about to be): only the executor's receipt can say what happened. */
    dispatched: {
      on: {
        'execution.started': [
          // The runtime runs one transition's effects one after another: cancel first, or the watch would hold it
          // back until the command exits on its own.
          { guard: 'cancelRequested', target: 'running', actions: ['start', 'stamp', cancel, watch] },
          { target: 'running', actions: ['start', 'stamp', watch] },
        ],
        'execution.exited': { target: 'exited', actions: ['exit', 'stamp', drain] },
        'execution.failed': { target: 'closing', actions: ['fail', 'stamp', unuse] },
        'execution.unknown': { target: 'closing', actions: ['markUnknown', 'stamp', unuse] },
        // Recorded now, sent once the receipt says running (a submit is in flight).
        'execution.cancel_requested': { guard: 'cancelNotRequested', actions: ['requestCancel', 'stamp'] },
        'runtime.recovered': { actions: inspect },
      },
    },
    running: {
      on: {
        'execution.exited': { target: 'exited', actions: ['exit', 'stamp', drain] },
        // The allocation was lost under it: no receipt can be read any more.
        'execution.unknown': { target: 'closing', actions: ['markUnknown', 'stamp', unuse] },
        'execution.cancel_requested': { guard: 'cancelNotRequested', actions: ['requestCancel', 'stamp', cancel] },
        'execution.cancel_confirmed': { guard: 'cancelRequested', actions: ['confirmCancel', 'stamp'] },
        // The watch that reported it has ended: cancel (unless already under way), then watch for the exit again.
        'execution.output_exceeded': [
          { guard: 'cancelNotRequested', actions: ['exceedOutput', 'requestCancel', 'stamp', cancel, watch] },
          { actions: ['exceedOutput', 'stamp', watch] },
        ],
        'runtime.recovered': [
          { guard: 'cancelRequested', actions: [cancel, watch] },
          { actions: watch },
        ],
      },
    },
    /** Exit status known; the tree and streams may still be draining. */
    exited: {
      on: {
        'execution.drained': [
          { guard: 'writesMount', target: 'checkpointing', actions: ['recordSizes', 'stamp', checkpoint] },
          { target: 'drained', actions: ['recordSizes', 'stamp', save] },
        ],
        'execution.cancel_confirmed': { guard: 'cancelRequested', actions: ['confirmCancel', 'stamp'] },
        'runtime.recovered': { actions: drain },
      },
    },
    /** The tree is gone and the streams closed; the workspace view it wrote is being checkpointed (still pinned). */
    checkpointing: {
      on: {
        'execution.checkpointed': { target: 'drained', actions: ['recordCheckpoint', 'stamp', save] },
        'execution.cancel_confirmed': { guard: 'cancelRequested', actions: ['confirmCancel', 'stamp'] },
        'runtime.recovered': { actions: checkpoint },
      },
    },
    drained: {
      on: {
        'execution.saved': { target: 'saved', actions: ['recordArtifacts', 'stamp', release, unuse] },
        'execution.cancel_confirmed': { guard: 'cancelRequested', actions: ['confirmCancel', 'stamp'] },
        'runtime.recovered': { actions: save },
      },
    },
    /** Output is in artifacts; the spool and the allocation use are being given back. */
    saved: {
      on: {
        'execution.released': { target: 'released', actions: 'stamp' },
        'execution.cancel_confirmed': { guard: 'cancelRequested', actions: ['confirmCancel', 'stamp'] },
        'runtime.recovered': { actions: [release, unuse] },
      },
    },
    /** A terminal outcome with no output to save: only the allocation use is given back. */
    closing: {
      on: {
        'execution.released': { target: 'released', actions: 'stamp' },
        'runtime.recovered': { actions: unuse },
      },
    },
    /** Nothing left to do; retention may compact it once it is old enough. */
    released: {
      on: { 'execution.compacted': { target: 'compacted', actions: ['compact', 'stamp'] } },
    },
    /** The record is kept as a summary; the output and the events before it are gone. */
    compacted: { type: 'final' },
  },
});

export type ExecutionSnapshot = SnapshotFrom<typeof executionMachine>;

/** Released or compacted: nothing is left to reconcile. */
export const finished = (snapshot: ExecutionSnapshot): boolean => snapshot.status === 'done' || snapshot.value === 'released';

/** The tombstone summary of a released execution (what `execution.compacted` keeps of it). */
export function compactionSummary(
  view: MachineView<ExecutionContext>,
  output: Compacted['output'],
  at: number,
): Compacted {
  const c = view.context;
  const status = executionStatus(view);
  if (view.state !== 'released' || status === 'accepted' || status === 'running') {
    throw new Error(`execution ${c.id} is ${String(view.state)}: only a released execution is compacted`);
  }
  return {
    type: 'execution.compacted',
    operationId: c.operationId,
    inputDigest: c.inputDigest,
    environmentId: c.environmentId,
    target: c.target,
    command: c.command,
    ...(c.version !== undefined ? { version: c.version } : {}),
    scope: c.scope,
    status,
    exitCode: c.exit?.exitCode ?? null,
    signal: c.exit?.signal ?? null,
    failure: c.failure,
    createdAt: c.createdAt,
    finishedAt: c.updatedAt,
    outputBytes: Object.values(c.sizes ?? {}).reduce((sum, n) => sum + (n ?? 0), 0),
    output,
    artifacts: c.artifacts ?? {},
    at,
  };
}

/** The context a summary gives back: the same record (status, exit, failure) as before the compaction. */
function contextOfSummary(e: Compacted): Partial<ExecutionContext> {
  const exited = e.exitCode !== null || e.signal !== null || e.status === 'exited';
  return {
    operationId: e.operationId,
    inputDigest: e.inputDigest,
    environmentId: e.environmentId,
    target: e.target,
    command: e.command,
    ...(e.version !== undefined ? { version: e.version } : {}),
    scope: e.scope,
    exit: exited ? { exitCode: e.exitCode, signal: e.signal, ...(e.status === 'cancelled' ? { cancelled: true } : {}), at: e.finishedAt } : null,
    outcome: e.status === 'failed' || e.status === 'unknown' || (e.status === 'cancelled' && !exited) ? e.status : null,
    failure: e.failure,
    artifacts: e.artifacts,
    createdAt: e.createdAt,
    updatedAt: e.finishedAt,
  };
}

/** The wire status of the execution record (DESIGN §8); the last four are terminal. */
export const executionStatus = ({ state, context }: MachineView<ExecutionContext>): ExecutionStatus => {
  const { outcome, exit } = context;
  if (outcome) return outcome;
  if (exit) return exit.cancelled ? 'cancelled' : 'exited';
  return state === 'running' ? 'running' : 'accepted';
};

/** The typed error for an event the execution does not accept in its current state. */
export const reject = (snapshot: ExecutionSnapshot, event: IncomingEvent): Rejection => {
  const { context } = snapshot;
  const state = snapshot.value;
  const detail = { state, status: executionStatus(viewOf(snapshot)), executionId: context.id };
  if (event.type === 'execution.accepted') {
    if (event.inputDigest !== context.inputDigest) {
      return {
        code: 'operation_conflict',
        message: 'The operationId is taken by a different input.',
        detail: { ...detail, operationId: context.operationId },
      };
    }
    return {
      code: 'invalid_state',
      message: 'The operation was already accepted.',
      detail: { ...detail, reason: 'already_accepted', operationId: context.operationId },
    };
  }
  if (state === 'pristine') return { code: 'not_found', message: 'The execution does not exist.', detail };
  if (event.type === 'execution.cancel_requested') {
    const reason = context.cancel !== 'none' ? 'cancel_already_requested' : 'finished';
    const message = context.cancel !== 'none' ? 'Cancellation was already requested.' : 'The command already finished.';
    return { code: 'invalid_state', message, detail: { ...detail, reason } };
  }
  return {
    code: 'invalid_state',
    message: `The execution does not accept ${event.type} while ${state}.`,
    detail: { ...detail, reason: 'unexpected' },
  };
};
