/**
 * The Docker executor: the shared spool/receipt protocol (supervisor.sh, spool.ts) inside an allocation's container.
 * The supervisor lives read-only in the allocation's volume (laid there at allocation), the spool is the volume's
 * `ops/` directory, and every command starts through the Docker exec API as UID 1000, so output and receipts stay in
 * the volume whatever happens to the runtime.
 *
 * Reaching the spool: straight through the volume's mountpoint when this process can write it (the engine is on
 * this host and we are root, as in CI: fast, and fs.watch sees the container's writes); otherwise (a remote or
 * rootless engine) through short execs in the container (exec-spool-access.ts: polled, tens of ms a call).
 * Liveness of a supervisor is the liveness of the exec that runs it (its id is kept in the operation directory);
 * a PTY run is owned by the runtime process, as on the native side.
 */
import { EventEmitter } from 'node:events';
import { access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import { isProcessAlive, processStartTime } from '../native/host-process.ts';
import type { OutputStream } from '../../../schemas/output.ts';
import type { ExecSpec, Executor, HeldFile, OutputChunk, Receipt } from '../provider.ts';
import { chdirInWorkspaceTarget, workspaceCwd } from '../workspace-view.ts';
import { assertOperationId, type Claim, deriveReceipt, Spool, SPOOL_PROTOCOL_VERSION, type SpoolState, SUPERVISOR_CLAIM_LOST } from '../spool.ts';
import { COMMAND_UID, COMMAND_USER } from './container-spec.ts';
import { createExec, execRunning, runToEnd, startAttached, startDetached } from './docker-exec.ts';
import { DockerPtyRun } from './docker-pty-run.ts';
import { ExecSpoolAccess } from './exec-spool-access.ts';
import { HostSpoolAccess, type SpoolAccess } from './spool-access.ts';
import { SpareExec, spareScript, type Spare } from './spare-exec.ts';
import { OPS_DIR, SUPERVISOR_IN_CONTAINER } from './spool-volume.ts';

const EXEC_ID_FILE = 'docker-exec';
const DEFAULT_GRACE_MS = 2_000;
/** How long submit waits for the supervisor to launch the command (or refuse) before giving up. */
const LAUNCH_TIMEOUT_MS = 30_000;
/** How long a launching supervisor is left to claim before its exec is asked whether it still runs. */
const LAUNCH_LOOK_MS = 100;
/** A command still running this long after its launch gets the next spare exec started anyway. */
const SPARE_AFTER_MS = 250;

export interface DockerExecutorOptions {
  /** Control calls (with an idle timeout). */
  docker: Docker;
  /** Attached streams (no idle timeout: a quiet command must not be cut). */
  streams: Docker;
  containerId: string;
  volume: string;
  /** `auto`: the host's view of the volume when writable, else exec. `exec` forces the engine path. */
  spoolAccess?: 'auto' | 'exec';
  graceMs?: number;
}

export class DockerExecutor implements Executor {
  readonly protocolVersion = SPOOL_PROTOCOL_VERSION;
  private spoolReady?: Promise<SpoolAccess>;
  private readonly ptyRuns = new Map<string, DockerPtyRun>();
  /** Terminal runs claimed by this process and not finished (a superset of ptyRuns while one is starting). */
  private readonly ownedPty = new Set<string>();
  private readonly stdinWriters = new Map<string, Duplex>();
  private readonly changes = new EventEmitter();
  private readonly graceMs: number;
  /** A supervisor exec started ahead of the next submit (spare-exec.ts). */
  private readonly spare: SpareExec;

  constructor(private readonly o: DockerExecutorOptions) {
    this.graceMs = o.graceMs ?? DEFAULT_GRACE_MS;
    this.changes.setMaxListeners(0);
    this.spare = new SpareExec({ docker: o.docker, streams: o.streams, containerId: o.containerId, user: COMMAND_USER });
    this.spare.fill();
  }

  async submit(spec: ExecSpec): Promise<Receipt> {
    assertOperationId(spec.operationId);
    if (spec.mounts?.length) {
      throw new BerthError('invalid_request', 'A Docker allocation cannot gain mounts after it started.', {
        operationId: spec.operationId,
      });
    }
    const spool = await this.spool();
    if ((await spool.readState(spec.operationId)).claim) return this.status(spec.operationId);
    const run = inWorkspace(spec);
    return run.pty ? this.submitPty(spool, run, run.pty) : this.submitSupervised(spool, run);
  }

  async status(operationId: string): Promise<Receipt> {
    const spool = await this.spool();
    const state = await spool.readState(operationId);
    if (state.receipt) {
      this.closeStdin(operationId);
      return deriveReceipt(operationId, state, false);
    }
    if (!state.claim) return deriveReceipt(operationId, state, false);
    const alive = await this.ownerAlive(spool, operationId, state.claim);
    return deriveReceipt(operationId, state, alive, alive ? await spool.currentSizes(operationId) : undefined);
  }

  async abandon(operationId: string): Promise<Receipt> {
    assertOperationId(operationId);
    const spool = await this.spool();
    if (await spool.createExclusive(operationId, 'claim', 'abandoned\n')) {
      return { protocolVersion: SPOOL_PROTOCOL_VERSION, operationId, state: 'absent' };
    }
    return this.status(operationId);
  }

  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes?: number): Promise<OutputChunk> {
    return (await this.spool()).read(operationId, stream, cursor, maxBytes);
  }

  /** The spool file through the volume's mountpoint, held open; none when the spool is reached through execs. */
  async spoolFile(operationId: string, stream: OutputStream): Promise<HeldFile | undefined> {
    const spool = await this.spool();
    return spool instanceof HostSpoolAccess ? spool.holdOutput(operationId, stream) : undefined;
  }

  async waitForChange(operationId: string, timeoutMs: number, since?: Partial<Record<OutputStream, number>>): Promise<void> {
    const spool = await this.spool();
    const fingerprint = async () => {
      const receipt = await spool.readReceipt(operationId);
      return JSON.stringify([receipt !== undefined, await spool.currentSizes(operationId)]);
    };
    // With the caller's cursors, exact (the receipt, or bytes past one of them); else any change from now on.
    const pastCursors = async (cursors: Partial<Record<OutputStream, number>>) => {
      if ((await spool.readReceipt(operationId)) !== undefined) return true;
      const sizes = await spool.currentSizes(operationId);
      return Object.entries(cursors).some(([stream, cursor]) => sizes[stream as OutputStream] > cursor!);
    };
    const before = since ? undefined : await fingerprint();
    await spool.waitUntil(
      operationId,
      async () => ((since ? await pastCursors(since) : (await fingerprint()) !== before) ? true : undefined),
      timeoutMs,
      (wake) => {
        this.changes.on(operationId, wake);
        return () => this.changes.off(operationId, wake);
      },
    );
  }

  async writeStdin(operationId: string, bytes: Buffer): Promise<void> {
    const pty = this.ptyRuns.get(operationId);
    if (pty) return pty.write(bytes);
    const writer = this.stdinWriter(operationId);
    await new Promise<void>((resolve, reject) => writer.write(bytes, (e) => (e ? reject(e) : resolve())));
  }

  async endStdin(operationId: string): Promise<void> {
    const pty = this.ptyRuns.get(operationId);
    if (pty) return pty.end();
    this.stdinWriter(operationId);
    this.closeStdin(operationId);
  }

  async resize(operationId: string, cols: number, rows: number): Promise<void> {
    const pty = this.ptyRuns.get(operationId);
    if (!pty) throw new BerthError('invalid_state', 'The operation has no terminal held by this runtime.', { operationId });
    await pty.resize(cols, rows);
  }

  async cancel(operationId: string): Promise<Receipt> {
    const spool = await this.spool();
    await runToEnd(this.container(), {
      cmd: ['/bin/sh', SUPERVISOR_IN_CONTAINER, 'cancel', this.dirInContainer(operationId), '-g', String(this.graceMs)],
      user: COMMAND_USER,
    });
    // The stop sequence ends with SIGKILL after the grace period; the receipt follows once the tree is drained.
    await spool.waitUntil(operationId, async () => ((await this.status(operationId)).state === 'running' ? undefined : true), this.graceMs + 10_000);
    return this.status(operationId);
  }

  async release(operationId: string): Promise<void> {
    this.closeStdin(operationId);
    this.ptyRuns.delete(operationId);
    await (await this.spool()).release(operationId);
    this.spare.fill();
  }

  /** Resolves once no spare exec is starting: engine work of this executor that no caller waits for. */
  settled(): Promise<void> {
    return this.spare.settled();
  }

  /** Ends the spare exec (the runtime stops); running commands are not touched. */
  close(): Promise<void> {
    return this.spare.close();
  }

  /** How the spool is reached: 'host' (the volume's mountpoint) or 'exec'. */
  async spoolVia(): Promise<'host' | 'exec'> {
    return (await this.spool()).via;
  }

  private async submitSupervised(spool: SpoolAccess, spec: ExecSpec): Promise<Receipt> {
    const { operationId } = spec;
    const args = ['run', this.dirInContainer(operationId)];
    if (spec.cwd) args.push('-C', spec.cwd);
    if (spec.stdin) args.push('-i');
    if (spec.timeoutMs !== undefined) args.push('-t', String(spec.timeoutMs));
    args.push('-g', String(this.graceMs), '--', ...spec.command);
    // Started in the spare shell (the supervisor sourced there) when the variables can be exported as given.
    const script = spareScript(SUPERVISOR_IN_CONTAINER, args, spec.env);
    const spare = script === undefined ? undefined : await this.spare.take();
    const exec = spare?.exec ?? (await createExec(this.container(), { cmd: ['/bin/sh', SUPERVISOR_IN_CONTAINER, ...args], user: COMMAND_USER, env: spec.env }, {}));
    // Recorded before the supervisor can claim, so whoever reads the claim can tell whether its supervisor still
    // runs; exclusive, so of two racing submits only one starts a supervisor (the other's exec is never used).
    if (!(await spool.createExclusive(operationId, EXEC_ID_FILE, exec.id))) {
      if (spare) this.spare.giveBack(spare);
      await spool.waitUntil(operationId, async () => ((await spool.readState(operationId)).claim ? true : undefined), LAUNCH_TIMEOUT_MS);
      return this.status(operationId);
    }
    await this.launch(exec, spare, script);

    // The engine is asked only when no claim came for a while (an exec that could not run at all).
    let lastLook = Date.now();
    const launched = await spool.waitUntil(
      operationId,
      async (): Promise<SpoolState | string | undefined> => {
        const state = await spool.readState(operationId);
        if (state.started || state.receipt || state.claim?.kind === 'abandoned' || state.claim?.kind === 'pty') return state;
        if (Date.now() - lastLook < LAUNCH_LOOK_MS) return undefined;
        lastLook = Date.now();
        const info = await exec.inspect();
        if (info.Running) return undefined;
        // Exited without launching: it lost the claim to another claimant, or could not run at all.
        return info.ExitCode === SUPERVISOR_CLAIM_LOST ? spool.readState(operationId) : `exit ${info.ExitCode}`;
      },
      LAUNCH_TIMEOUT_MS,
    );
    if (typeof launched !== 'object' || !launched.claim) {
      throw new BerthError('internal', `The in-container supervisor did not launch the command (${launched ?? 'timed out'}).`, { operationId });
    }
    if (spec.stdin && !launched.receipt) await this.openStdin(operationId);
    // Just launched by our own exec: its owner is alive unless the state already says otherwise.
    if (launched.started && !launched.receipt) return deriveReceipt(operationId, launched, true, await spool.currentSizes(operationId));
    return this.status(operationId);
  }

  /**
   * Starts the supervisor: in the spare shell, or in the exec made for it. The next spare is started once this
   * command is over (its spool released), or once it has run a while: not during a short command's own run, which
   * that engine work (tens of ms of runc) would slow down.
   */
  private async launch(exec: Docker.Exec, spare: Spare | undefined, script: string | undefined): Promise<void> {
    this.spare.fillAfter(SPARE_AFTER_MS);
    if (spare && script !== undefined) spare.run(script);
    else await startDetached(exec);
  }

  private async submitPty(spool: SpoolAccess, spec: ExecSpec, size: { cols: number; rows: number }): Promise<Receipt> {
    const { operationId } = spec;
    const me = await processStartTime(process.pid);
    this.ownedPty.add(operationId);
    if (!(await spool.createExclusive(operationId, 'claim', `pty ${process.pid} ${me}\n`))) {
      this.ownedPty.delete(operationId);
      return this.status(operationId);
    }
    let run: DockerPtyRun;
    try {
      run = await DockerPtyRun.start({
        container: this.o.streams.getContainer(this.o.containerId),
        spool,
        operationId,
        dir: this.dirInContainer(operationId),
        argv: spec.command,
        cwd: spec.cwd,
        env: spec.env,
        user: COMMAND_USER,
        cols: size.cols,
        rows: size.rows,
        onChange: () => this.changes.emit(operationId),
      });
    } catch (error) {
      // Claimed but never started: with no owner left, readers see it absent for good.
      this.ownedPty.delete(operationId);
      throw error;
    }
    this.ptyRuns.set(operationId, run);
    // The supervisor times out supervised commands; a terminal run is timed by its owner, this runtime.
    const timer =
      spec.timeoutMs === undefined
        ? undefined
        : setTimeout(() => void spool.marker(operationId, 'timedout').then(() => this.cancel(operationId)).catch(() => undefined), spec.timeoutMs);
    // A run whose container vanished cannot write its receipt: readers then see a dead owner (absent), as after a crash.
    void run.done
      .catch(() => undefined)
      .finally(() => {
        clearTimeout(timer);
        this.ptyRuns.delete(operationId);
        this.ownedPty.delete(operationId);
      });
    await spool.waitUntil(operationId, async () => {
      const state = await spool.readState(operationId);
      return state.started || state.receipt ? true : undefined;
    }, LAUNCH_TIMEOUT_MS);
    return this.status(operationId);
  }

  /**
   * The supervisor made the FIFO before launching the command, which now waits for a writer: an attached exec of
   * `cat` holds it, fed from this runtime. If the runtime dies, the exec's stdin closes and the command sees EOF.
   */
  private async openStdin(operationId: string): Promise<void> {
    const fifo = `${this.dirInContainer(operationId)}/stdin`;
    const exec = await createExec(
      this.o.streams.getContainer(this.o.containerId),
      { cmd: ['/bin/sh', '-c', '[ -p "$1" ] && exec cat >"$1"', 'berth-stdin', fifo], user: COMMAND_USER },
      { stdin: true },
    );
    const stream = await startAttached(exec, false);
    stream.on('error', () => this.stdinWriters.delete(operationId));
    stream.resume();
    this.stdinWriters.set(operationId, stream);
  }

  private stdinWriter(operationId: string): Duplex {
    const writer = this.stdinWriters.get(operationId);
    if (!writer) throw new BerthError('invalid_state', 'The operation has no open stdin held by this runtime.', { operationId });
    return writer;
  }

  private closeStdin(operationId: string): void {
    const writer = this.stdinWriters.get(operationId);
    if (!writer) return;
    this.stdinWriters.delete(operationId);
    writer.end();
  }

  private async ownerAlive(spool: SpoolAccess, operationId: string, claim: Claim): Promise<boolean> {
    if (claim.kind === 'abandoned') return false;
    // A terminal run of this very process is alive exactly while it is followed here.
    if (claim.kind === 'pty') return claim.pid === process.pid ? this.ownedPty.has(operationId) : isProcessAlive(claim.pid, claim.startTime);
    const execId = await spool.readText(operationId, EXEC_ID_FILE);
    if (execId) return execRunning(this.o.docker, execId.trim());
    if (claim.kind === 'pending') return false;
    // Not started by a Docker executor: ask the container whether that pid still runs.
    const { exitCode } = await runToEnd(this.container(), { cmd: ['/bin/sh', '-c', 'kill -0 "$1"', 'berth-alive', String(claim.pid)], user: COMMAND_USER });
    return exitCode === 0;
  }

  private dirInContainer(operationId: string): string {
    return `${OPS_DIR}/${operationId}`;
  }

  private container(): Docker.Container {
    return this.o.docker.getContainer(this.o.containerId);
  }

  private spool(): Promise<SpoolAccess> {
    this.spoolReady ??= (async (): Promise<SpoolAccess> => {
      const viaExec = () => new ExecSpoolAccess(this.container(), this.o.streams.getContainer(this.o.containerId), OPS_DIR);
      if (this.o.spoolAccess === 'exec') return viaExec();
      const { Mountpoint } = await this.o.docker.getVolume(this.o.volume).inspect();
      const root = join(Mountpoint, 'ops');
      try {
        await access(root, constants.R_OK | constants.W_OK);
        return new HostSpoolAccess(new Spool(root, { owner: { uid: COMMAND_UID, gid: COMMAND_UID } }));
      } catch {
        return viaExec();
      }
    })();
    this.spoolReady.catch(() => (this.spoolReady = undefined));
    return this.spoolReady;
  }
}

/**
 * A workspace execution runs in the allocation's view at /workspace/<cwd> (the view is the container's own staging
 * volume: nothing to mount). The supervisor changes directory, so a cwd missing in the view is the receipt's error.
 */
const inWorkspace = (spec: ExecSpec): ExecSpec =>
  spec.workspace ? { ...spec, workspace: undefined, cwd: chdirInWorkspaceTarget(workspaceCwd(spec.workspace, spec.cwd, 'materialized')) } : spec;
