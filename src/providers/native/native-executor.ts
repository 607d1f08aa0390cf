/**
 * The native executor: runs commands on the borrowed host under the detached sh supervisor (supervisor.sh), so
 * their output and receipts live in the spool and outlive the runtime; PTY commands run under the runtime itself
 * (pty-run.ts). Optional bubblewrap containment comes from the profile. One spool directory per allocation.
 */
import { isAbsolute, join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import { outputStreams, type OutputStream } from '../../../schemas/output.ts';
import type { ExecSpec, Executor, HeldFile, OutputChunk, Receipt } from '../provider.ts';
import { assertCommandEnv, hostAccount } from '../command-env.ts';
import {
  assertOperationId,
  deriveReceipt,
  DEFAULT_READ_BYTES,
  SPOOL_PROTOCOL_VERSION,
  Spool,
  SUPERVISOR_CLAIM_LOST,
  type Claim,
} from '../spool.ts';
import { bubblewrapArgv, carriedEnv, carryingPidOne, findBubblewrap, type Containment } from './bubblewrap.ts';
import { SPARE_PID_ONE } from './launcher-lines.ts';
import { FifoWriter } from './fifo-writer.ts';
import { isProcessAlive, isSupervisorAlive, sessionWritesTo, stopSession } from './host-process.ts';
import { PtyRun } from './pty-run.ts';
import { privilegeDropArgv, sandboxIdentity } from './sandbox-identity.ts';
import { SandboxView } from './sandbox-view.ts';
import { chdirInWorkspaceTarget, workspaceCwd } from '../workspace-view.ts';
import {
  superviseContained,
  superviseDetached,
  superviseRun,
  type Launch,
  type LaunchOutcome,
  type SandboxRun,
} from './supervisor-launcher.ts';

export interface NativeExecutorOptions {
  /** `<dataDir>/spool/<allocationId>`. */
  spoolDir: string;
  profile: Profile;
  /** What contained commands see (the provider's, shared); else one hiding `hidden` from the default identity. */
  view?: SandboxView;
  /** Host paths a contained command must not see (the Berth data dir), when no view is given. */
  hidden?: string[];
  /** Between SIGTERM and SIGKILL when cancelling or timing out. */
  graceMs?: number;
  /** Puts a contained command under its allocation's limits before it drops privilege (allocation-limits.ts). */
  limitPrefix?: string[];
}

/** What this process holds for an operation it runs: handles that exist only while the runtime lives. */
interface LiveOperation {
  /** The supervisor this process launched and that owns the claim, until its exit is known. */
  supervisor?: Launch;
  pty?: PtyRun;
  stdin?: FifoWriter;
  listeners: Set<() => void>;
}

/** Process-wide, keyed by operation directory: every executor over the same spool sees the same handles. */
const live = new Map<string, LiveOperation>();

function liveFor(dir: string): LiveOperation {
  let op = live.get(dir);
  if (!op) live.set(dir, (op = { listeners: new Set() }));
  return op;
}

function notify(dir: string): void {
  for (const listener of live.get(dir)?.listeners ?? []) listener();
}

function forget(dir: string): void {
  const op = live.get(dir);
  if (op && !op.supervisor && !op.pty && !op.stdin && op.listeners.size === 0) live.delete(dir);
}

/** A claim whose content is not written yet is taken as live for this long. */
const PENDING_CLAIM_MS = 10_000;

/** What a read of one stream saw: the stream's size then, and whether the receipt was already there. */
interface StreamSeen {
  size: number;
  final: boolean;
}


export class NativeExecutor implements Executor {
  readonly protocolVersion = SPOOL_PROTOCOL_VERSION;
  readonly settles = true;
  private readonly spool: Spool;
  private readonly graceMs: number;
  private readonly view: SandboxView;
  /** What status and reads last saw of each stream, so waitForChange cannot miss a change made just before it. */
  private readonly observed = new Map<string, Partial<Record<OutputStream, StreamSeen>>>();

  constructor(private readonly options: NativeExecutorOptions) {
    this.spool = new Spool(options.spoolDir);
    this.graceMs = options.graceMs ?? 2000;
    this.view = options.view ?? new SandboxView(sandboxIdentity(), options.hidden ?? []);
  }

  async submit(spec: ExecSpec): Promise<Receipt> {
    validate(spec);
    const id = spec.operationId;
    // A refusal (a cwd the sandbox does not show, no bwrap) comes before the spool exists: nothing is claimed.
    const { argv, cwd, env, sandbox } = this.launch(spec);
    if (!(await this.spool.create(id))) {
      const claim = await this.spool.readClaim(id);
      if (claim) return this.existing(id, claim);
    }
    const { env: _secret, ...recorded } = spec;
    await this.spool.writeNew(id, 'spec.json', `${JSON.stringify({ ...recorded, argv })}\n`);
    const launched = { ...spec, env };
    return spec.pty ? this.startPty(launched, argv, cwd) : this.startSupervised(launched, argv, cwd, sandbox);
  }

  private async startSupervised(spec: ExecSpec, argv: string[], cwd: string, sandbox?: SandboxRun): Promise<Receipt> {
    const id = spec.operationId;
    const dir = this.spool.dir(id);
    // Detached (the launcher's session): no SIGHUP, not in the runtime's process group, outlives the runtime.
    const run = { dir, cwd, graceMs: this.graceMs, stdin: spec.stdin, argv, ...(spec.timeoutMs !== undefined ? { timeoutMs: spec.timeoutMs } : {}) };
    const supervisor = sandbox ? superviseContained(run, spec.env, sandbox) : superviseRun(run, spec.env);
    const op = liveFor(dir);
    let pid: number | undefined;
    let exit: LaunchOutcome | undefined;
    void supervisor.pid.then((p) => {
      pid = p;
      notify(dir);
    });
    void supervisor.exited.then((outcome) => {
      exit = outcome;
      if (op.supervisor === supervisor) {
        op.supervisor = undefined;
        op.stdin?.destroy();
        op.stdin = undefined;
      }
      notify(dir);
      forget(dir);
    });

    // This supervisor claimed the operation and started it (or already finished), or it ended without starting
    // anything (a duplicate submit's supervisor that lost the claim). Another claimant's progress does not count:
    // this submit answers only once its own supervisor can no longer touch the operation's directory. A started
    // command is answered settleMs after this submit first saw it started, or at its exit before that: counted from
    // the submit, a command queued behind others (100 at once) was past its settle time before it ran, and each
    // such quick command then cost the runtime four appends (started, exited, drained, saved) instead of one.
    const settleMs = spec.settleMs ?? 0;
    let settleBy: number | undefined;
    let wakeUp: (() => void) | undefined;
    let settled: NodeJS.Timeout | undefined;
    const seen = await this.spool.waitUntil(
      id,
      async () => {
        const claim = pid === undefined ? undefined : await this.spool.readClaim(id);
        if (claim?.kind === 'supervisor' && claim.pid === pid) {
          op.supervisor = exit ? undefined : supervisor;
          const receipt = await this.spool.readReceipt(id);
          if (receipt) return { receipt, started: await this.spool.readStarted(id) };
          const started = await this.spool.readStarted(id);
          if (started && settleBy === undefined) {
            settleBy = performance.now() + settleMs;
            settled = setTimeout(() => wakeUp?.(), settleMs);
          }
          if (started && performance.now() >= settleBy!) return { started };
        }
        return exit && { exit };
      },
      Number.POSITIVE_INFINITY,
      (wake) => {
        wakeUp = wake;
        const unlisten = this.listen(dir, wake);
        return () => {
          unlisten();
          clearTimeout(settled);
        };
      },
    );
    if (seen && 'exit' in seen) {
      const outcome = seen.exit!;
      const detail = { operationId: id };
      if ('error' in outcome) throw new BerthError('unavailable', `Cannot start the supervisor: ${outcome.error.message}`, detail);
      if (outcome.code === SUPERVISOR_CLAIM_LOST) return this.existing(id, await this.spool.readClaim(id));
      throw new BerthError('internal', `The supervisor exited with status ${outcome.code} without a receipt.`, detail);
    }
    if (spec.stdin && !seen?.receipt && op.supervisor === supervisor) op.stdin = this.openStdin(id);
    return deriveReceipt(id, { claim: { kind: 'supervisor', pid: pid! }, ...seen }, true);
  }

  private async startPty(spec: ExecSpec, argv: string[], cwd: string): Promise<Receipt> {
    const id = spec.operationId;
    const dir = this.spool.dir(id);
    const run = await PtyRun.start({
      spool: this.spool,
      operationId: id,
      argv,
      cwd,
      env: spec.env,
      cols: spec.pty!.cols,
      rows: spec.pty!.rows,
      timeoutMs: spec.timeoutMs,
      graceMs: this.graceMs,
      onChange: () => notify(dir),
    });
    if (!run) return this.existing(id, await this.spool.readClaim(id));
    const op = liveFor(dir);
    op.pty = run;
    void run.done.finally(() => {
      if (op.pty === run) op.pty = undefined;
      forget(dir);
    });
    return this.status(id);
  }

  /** A second submit of a claimed operation never runs it: it reports what the first one did. */
  private async existing(id: string, claim: Claim | undefined): Promise<Receipt> {
    if (claim?.kind === 'abandoned') {
      throw new BerthError('invalid_state', 'Recovery declared this operation absent: it can never run.', { operationId: id });
    }
    return this.status(id);
  }

  /**
   * What the supervisor starts, where, and with what environment. Contained: the allocation's limits, then the
   * sandbox identity's bwrap (the supervisor itself stays in /, bwrap changes to the confined cwd), HOME in the
   * private /tmp.
   */
  private launch(spec: ExecSpec): { argv: string[]; cwd: string; env: Record<string, string>; sandbox?: SandboxRun } {
    const { workspace } = spec;
    const inWorkspace = workspace ? workspaceCwd(workspace, spec.cwd) : undefined;
    for (const m of spec.mounts ?? []) this.view.reach(m.source);
    if (!this.options.profile.contain) {
      // The borrowed host as the admin has it (trusted): the workspace is only where the command starts; its inputs
      // and hidden names are not enforced.
      const cwd = workspace ? join(workspace.source, inWorkspace!) : (spec.cwd ?? spec.env.HOME ?? '/');
      return { argv: spec.command, cwd, env: spec.env };
    }
    // bwrap looks the workspace and its inputs up as the sandbox identity.
    if (workspace) for (const dir of [workspace.source, workspace.inputs]) if (dir !== undefined) this.view.reach(dir);
    const { chdir, makeChdir } = workspace ? { chdir: chdirInWorkspaceTarget(inWorkspace!), makeChdir: false } : this.view.confine(spec.cwd, spec.mounts);
    const bwrap = findBubblewrap();
    if (!bwrap) {
      const message = 'The profile asks for containment and bubblewrap (bwrap) is not installed.';
      throw new BerthError('unavailable', message, { operationId: spec.operationId });
    }
    const containment = {
      mounts: spec.mounts,
      network: this.options.profile.network,
      hidden: this.view.hidingTargets(),
      workspace,
      chdir,
      makeChdir,
      unprivileged: true,
    };
    const prefix = [...(this.options.limitPrefix ?? []), ...privilegeDropArgv(this.view.identity)];
    // The caller's variables are the command's alone: the processes before the sandbox (root's, then bwrap) get them
    // under names that mean nothing to them, and the sandbox's pid 1 gives them back (bubblewrap.ts carriedEnv).
    const env = this.sandboxEnv(spec.env);
    const argv = [...prefix, ...bubblewrapArgv(bwrap, containment, carryingPidOne(Object.keys(env))), ...spec.command];
    return { argv, cwd: '/', env: carriedEnv(env), sandbox: workspace ? undefined : this.spareRun(spec, prefix, bwrap, containment, env) };
  }

  /**
   * The same sandbox made ahead of need, at /tmp, its pid 1 waiting for the command (supervisor-launcher.ts). None for
   * a workspace command: a spare is made before its command is known, and a workspace's bind must be made by the
   * command's own bwrap, from the source the runtime checked just before (a spare would hold the directory it found
   * when it was made). Such a command pays a whole sandbox start.
   */
  private spareRun(spec: ExecSpec, prefix: string[], bwrap: string, containment: Containment, env: Record<string, string>): SandboxRun {
    const spare = [...prefix, ...bubblewrapArgv(bwrap, { ...containment, chdir: '/tmp', makeChdir: false }, SPARE_PID_ONE)];
    return { key: { prefix: spare, outRoot: this.options.spoolDir }, command: spec.command, env, cwd: containment.chdir!, makeDir: containment.makeChdir ?? false };
  }

  /** The base's HOME and USER name the server's account: a contained command's home is its private /tmp. */
  private sandboxEnv(given: Record<string, string>): Record<string, string> {
    const account = hostAccount();
    const env = { ...given };
    if (env.HOME === account.home) env.HOME = '/tmp';
    if (env.USER === account.name) env.USER = this.view.identity.name;
    return env;
  }

  async status(operationId: string): Promise<Receipt> {
    const receipt = await this.look(operationId);
    const seen = this.observation(operationId);
    for (const s of outputStreams) seen[s] = { size: receipt.sizes?.[s] ?? 0, final: receipt.state === 'exited' };
    return receipt;
  }

  private async look(operationId: string): Promise<Receipt> {
    const state = await this.spool.readState(operationId);
    if (state.receipt || !state.claim || state.claim.kind === 'abandoned') return deriveReceipt(operationId, state, false);
    if (!(await this.ownerAlive(operationId, state.claim))) {
      // The owner may have written its receipt just before exiting.
      const receipt = await this.spool.readReceipt(operationId);
      return deriveReceipt(operationId, receipt ? { ...state, receipt } : state, false);
    }
    return deriveReceipt(operationId, state, true, await this.spool.currentSizes(operationId));
  }

  private async ownerAlive(operationId: string, claim: Claim): Promise<boolean> {
    const dir = this.spool.dir(operationId);
    const op = live.get(dir);
    if (op?.supervisor || op?.pty) return true;
    switch (claim.kind) {
      case 'supervisor':
        return claim.startTime ? isProcessAlive(claim.pid, claim.startTime) : isSupervisorAlive(claim.pid, dir);
      case 'pty':
        return isProcessAlive(claim.pid, claim.startTime);
      case 'pending': {
        const claimed = await this.spool.entryStat(operationId, 'claim');
        return claimed !== undefined && Date.now() - claimed.mtimeMs < PENDING_CLAIM_MS;
      }
      case 'abandoned':
        return false;
    }
  }

  async abandon(operationId: string): Promise<Receipt> {
    if (await this.spool.abandon(operationId)) return deriveReceipt(operationId, {}, false);
    return this.status(operationId);
  }

  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes = DEFAULT_READ_BYTES, into?: Buffer): Promise<OutputChunk> {
    const { data, next, closed, size, final } = await this.spool.read(operationId, stream, cursor, maxBytes, into);
    this.observation(operationId)[stream] = { size, final };
    return { data, next, closed };
  }

  spoolFile(operationId: string, stream: OutputStream): Promise<HeldFile | undefined> {
    return this.spool.holdOutput(operationId, stream);
  }

  /**
   * With `since`, exact: resolves once a stream holds bytes past the caller's cursor, or the receipt exists. Without
   * it, judged against the last status and reads of this executor: output grew past what they saw, or the receipt
   * appeared after them; with no look yet, any change from the moment of the call. (Several followers of one stream
   * without `since` may wake late, up to the timeout: the later reader's look hides the change from the earlier.)
   */
  async waitForChange(operationId: string, timeoutMs: number, since?: Partial<Record<OutputStream, number>>): Promise<void> {
    const dir = this.spool.dir(operationId);
    const seen = { ...this.observed.get(operationId) };
    const looked = outputStreams.filter((s) => seen[s]);
    let baseline: { receipt: boolean; sizes: Record<OutputStream, number> } | undefined;
    await this.spool.waitUntil(
      operationId,
      async () => {
        const receipt = (await this.spool.readReceipt(operationId)) !== undefined;
        if (since) {
          if (receipt) return true;
          if (!outputStreams.some((s) => since[s] !== undefined)) return undefined; // the receipt alone is awaited
          const sizes = await this.spool.currentSizes(operationId);
          return outputStreams.some((s) => since[s] !== undefined && sizes[s] > since[s]!) ? true : undefined;
        }
        if (looked.length > 0 && receipt && looked.some((s) => !seen[s]!.final)) return true;
        const sizes = await this.spool.currentSizes(operationId);
        if (looked.length > 0) return looked.some((s) => sizes[s] > seen[s]!.size) ? true : undefined;
        if (!baseline) {
          baseline = { receipt, sizes };
          return undefined;
        }
        return receipt !== baseline.receipt || outputStreams.some((s) => sizes[s] !== baseline!.sizes[s]) ? true : undefined;
      },
      timeoutMs,
      (wake) => this.listen(dir, wake),
      this.watchedStreams(dir, since),
    );
  }

  /**
   * What waitForChange watches the operation's directory for. With `since`, writes to streams it does not name
   * decide nothing and wake nothing. The receipt alone, of a command whose supervisor this process runs, needs no
   * watch at all: that supervisor's exit (right after its receipt) wakes the wait; a command that streams writes its
   * directory tens of thousands of times, and each write to a watched directory is an event for this process and a
   * slower write for the command.
   */
  private watchedStreams(dir: string, since?: Partial<Record<OutputStream, number>>): OutputStream[] | false | undefined {
    if (!since) return undefined;
    const streams = outputStreams.filter((s) => since[s] !== undefined);
    return streams.length === 0 && live.get(dir)?.supervisor ? false : streams;
  }

  private observation(operationId: string): Partial<Record<OutputStream, StreamSeen>> {
    let seen = this.observed.get(operationId);
    if (!seen) this.observed.set(operationId, (seen = {}));
    return seen;
  }

  private listen(dir: string, wake: () => void): () => void {
    const op = liveFor(dir);
    op.listeners.add(wake);
    return () => {
      op.listeners.delete(wake);
      forget(dir);
    };
  }

  async writeStdin(operationId: string, bytes: Buffer): Promise<void> {
    const op = live.get(this.spool.dir(operationId));
    if (op?.pty) return op.pty.write(bytes);
    await (await this.stdinWriter(operationId)).write(bytes);
  }

  async endStdin(operationId: string): Promise<void> {
    const op = live.get(this.spool.dir(operationId));
    if (op?.pty) return op.pty.end();
    const writer = await this.stdinWriter(operationId);
    await writer.end();
    if (op?.stdin === writer) op.stdin = undefined;
  }

  /** The writer this process holds, or a new one for an operation started elsewhere (e.g. before a restart). */
  private async stdinWriter(operationId: string): Promise<FifoWriter> {
    const dir = this.spool.dir(operationId);
    const held = live.get(dir)?.stdin;
    if (held) return held;
    const receipt = await this.status(operationId);
    const writer = receipt.state === 'running' ? this.openStdin(operationId) : undefined;
    if (!writer) throw new BerthError('invalid_state', 'The operation is not running with stdin.', { operationId, state: receipt.state });
    liveFor(dir).stdin = writer;
    return writer;
  }

  /** A writer on the operation's stdin FIFO; none when it is missing or is not a FIFO (the command replaced it). */
  private openStdin(operationId: string): FifoWriter | undefined {
    try {
      const fd = this.spool.openFifo(operationId, 'stdin');
      return fd === undefined ? undefined : new FifoWriter(fd);
    } catch (e) {
      if (e instanceof BerthError) return undefined;
      throw e;
    }
  }

  /** Only a live PTY has a size; resizing anything else is ignored. */
  async resize(operationId: string, cols: number, rows: number): Promise<void> {
    assertOperationId(operationId);
    live.get(this.spool.dir(operationId))?.pty?.resize(cols, rows);
  }

  async cancel(operationId: string): Promise<Receipt> {
    const dir = this.spool.dir(operationId);
    const state = await this.spool.readState(operationId);
    if (state.receipt) return this.status(operationId);
    // Never submitted: fence it, so it can never start.
    if (!state.claim && (await this.spool.abandon(operationId))) return this.status(operationId);
    const claim = state.claim ?? (await this.spool.readClaim(operationId));
    if (claim?.kind === 'abandoned') return this.status(operationId);
    await this.spool.marker(operationId, 'cancel');
    const op = live.get(dir);
    if (op?.pty) {
      await op.pty.stop();
      await op.pty.done;
    } else if (claim?.kind === 'pty') {
      // Another runtime's terminal: it hung up when that runtime died; a live one is not ours to stop.
    } else if (await this.ownerAlive(operationId, claim!)) {
      await this.runCanceller(dir);
      // Confirmed gone: the supervisor exits right after its receipt, once the whole group is.
      await this.spool.waitUntil(
        operationId,
        async () => ((await this.ownerAlive(operationId, claim!)) ? undefined : true),
        Number.POSITIVE_INFINITY,
        (wake) => this.listen(dir, wake),
      );
    } else {
      await this.stopOrphan(operationId);
    }
    return this.status(operationId);
  }

  /**
   * The command outlived its supervisor (SIGKILLed): stop its session, but only once /proc
   * shows it still writes this operation's spool, so a recycled pid is never signalled.
   */
  private async stopOrphan(operationId: string): Promise<void> {
    const started = await this.spool.readStarted(operationId);
    const outputs = outputStreams.map((s) => this.spool.file(operationId, s));
    if (started && (await sessionWritesTo(started.pgid, outputs))) await stopSession(started.pgid, this.graceMs);
  }

  /** The supervisor's own stop sequence (cancel marker, TERM to the group, KILL after the grace period). */
  private async runCanceller(dir: string): Promise<void> {
    const outcome = await superviseDetached(['cancel', dir, '-g', String(this.graceMs)], {}).exited;
    if ('error' in outcome) throw outcome.error;
  }

  /** Lets go of cached descriptors (the provider calls it when the allocation goes). Operations keep running. */
  close(): void {
    this.spool.close();
  }

  async release(operationId: string): Promise<void> {
    const receipt = await this.status(operationId);
    if (receipt.state === 'running') {
      throw new BerthError('invalid_state', 'A running operation cannot be released: cancel it first.', { operationId });
    }
    const dir = this.spool.dir(operationId);
    const op = live.get(dir);
    op?.stdin?.destroy();
    if (op) op.stdin = undefined;
    this.observed.delete(operationId);
    await this.spool.release(operationId);
  }
}

function validate(spec: ExecSpec): void {
  assertOperationId(spec.operationId);
  const bad = (message: string, detail: Record<string, unknown> = {}): never => {
    throw new BerthError('invalid_request', message, { operationId: spec.operationId, ...detail });
  };
  if (!Array.isArray(spec.command) || spec.command.length === 0) bad('The command is a non-empty argv.');
  if (spec.command.some((a) => typeof a !== 'string' || a.includes('\0'))) bad('Command arguments are strings without NUL.');
  if (spec.cwd !== undefined && !isAbsolute(spec.cwd)) bad('cwd is an absolute path.', { cwd: spec.cwd });
  const positive = (n: unknown): boolean => Number.isSafeInteger(n) && (n as number) > 0;
  if (spec.timeoutMs !== undefined && !positive(spec.timeoutMs)) bad('timeoutMs is a positive integer.');
  if (spec.pty && !(positive(spec.pty.cols) && positive(spec.pty.rows))) bad('A PTY has positive integer cols and rows.');
  for (const m of spec.mounts ?? []) {
    if (!isAbsolute(m.source) || !isAbsolute(m.target)) bad('Mount sources and targets are absolute paths.');
  }
  assertCommandEnv(spec.env);
}
