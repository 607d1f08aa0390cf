/**
 * A PTY execution in a container: a Docker exec with a TTY, owned by the runtime like the native PTY run (job
 * control needs the command to lead its own session on the terminal, which the sh supervisor cannot give). It
 * follows the spool protocol: claim `pty <runtime pid> <starttime>`, `started` (written by the in-container wrapper
 * with the command's own pid, so `supervisor.sh cancel` can stop its process group), every byte of the terminal
 * appended to `pty`, and a receipt from the exec's exit code. It does not survive a runtime crash: the claim then
 * names a dead process and readers see no receipt (unknown).
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { DEFAULT_TERM } from '../command-env.ts';
import { createExec, exitCodeOf, startAttached } from './docker-exec.ts';
import type { AppendSink, SpoolAccess } from './spool-access.ts';

/** Exit status of the wrapper when it cannot enter the working directory (nothing was started). */
const CWD_FAILED = 125;

/**
 * `$1` operation directory, `$2` working directory (may be empty), `$3` columns, `$4` rows, then argv. Sets the
 * terminal size itself where the image has stty (this engine API cannot size an exec's terminal before it starts,
 * and the host's resize may land after the command looked), records the command's pid (the session leader of the
 * TTY, so pid = pgid), unless a cancel came first, then becomes the command.
 */
const PTY_WRAPPER = `d=$1; c=$2; stty cols "$3" rows "$4" 2>/dev/null; shift 4
if [ -n "$c" ]; then cd "$c" 2>/dev/null || exit ${CWD_FAILED}; fi
[ -e "$d/cancel" ] && exit 0
echo "{\\"supervisor\\":$$,\\"pid\\":$$,\\"pgid\\":$$}" >"$d/started" || exit ${CWD_FAILED}
exec "$@"`;

export interface DockerPtyRunOptions {
  /** Reached through a client without idle timeout: a quiet terminal must not be cut. */
  container: Docker.Container;
  spool: SpoolAccess;
  operationId: string;
  /** The operation directory as the container sees it. */
  dir: string;
  argv: string[];
  cwd?: string;
  env: Record<string, string>;
  user: string;
  cols: number;
  rows: number;
  onChange: () => void;
}

export class DockerPtyRun {
  /** Resolves once the receipt is written. */
  readonly done: Promise<void>;

  private constructor(
    private readonly o: DockerPtyRunOptions,
    private readonly exec: Docker.Exec,
    private readonly stream: Duplex,
    private readonly sink: AppendSink,
  ) {
    this.done = this.follow();
  }

  /** The caller has claimed the operation; this starts the exec and follows it. */
  static async start(o: DockerPtyRunOptions): Promise<DockerPtyRun> {
    const env = { TERM: DEFAULT_TERM, ...o.env };
    const sink = await o.spool.openAppend(o.operationId, 'pty');
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      const argv = ['/bin/sh', '-c', PTY_WRAPPER, 'berth-pty', o.dir, o.cwd ?? '', String(o.cols), String(o.rows), ...o.argv];
      exec = await createExec(o.container, { cmd: argv, user: o.user, env, tty: true }, { stdin: true, output: true });
      stream = await startAttached(exec, true);
    } catch (error) {
      await sink.close();
      throw error;
    }
    const run = new DockerPtyRun(o, exec, stream, sink);
    await run.resize(o.cols, o.rows);
    return run;
  }

  write(bytes: Buffer): void {
    this.stream.write(bytes);
  }

  /** A terminal has no separate end of input: EOF is the VEOF character (Ctrl-D) at the start of a line. */
  end(): void {
    this.stream.write('\x04');
  }

  async resize(cols: number, rows: number): Promise<void> {
    try {
      await this.exec.resize({ h: rows, w: cols });
    } catch (error) {
      // The engine refuses to resize an exec that already ended; there is nothing left to resize.
      if (!(await this.exec.inspect()).Running) return;
      throw error;
    }
  }

  private async follow(): Promise<void> {
    const { spool, operationId, onChange } = this.o;
    const sink = this.sink;
    this.stream.on('data', (data: Buffer) => {
      sink.write(data);
      onChange();
    });
    await new Promise<void>((resolve) => {
      this.stream.on('end', resolve);
      this.stream.on('close', resolve);
      this.stream.on('error', () => resolve());
    });
    await sink.close();
    const exitCode = await exitCodeOf(this.exec);
    const { started } = await spool.readState(operationId);
    const [cancelled, timedOut] = await Promise.all([spool.hasMarker(operationId, 'cancel'), spool.hasMarker(operationId, 'timedout')]);
    const error = !started && exitCode === CWD_FAILED ? 'cwd' : undefined;
    await spool.writeReceipt(operationId, { status: started ? exitCode : null, cancelled, timedOut, ...(error ? { error } : {}) });
    onChange();
  }
}
