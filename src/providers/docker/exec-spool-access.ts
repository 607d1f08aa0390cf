/**
 * The spool reached through the engine, for an engine this process cannot see the files of (remote, TLS): every
 * operation is a short exec of POSIX sh as the command's user in the allocation's container. Same protocol and
 * parsers as the host side (spool.ts); slower (one exec, some tens of ms, per call) and polled instead of watched.
 * Needs in the image, beyond /bin/sh: cat, mkdir, mv, rm, tail, head -c, wc; stat for exact mtimes (else "now").
 * Every call runs as the command's user inside its container, so a link it planted resolves only to what the
 * container itself shows; files are read only when they are regular files and not links, so a planted FIFO does
 * not hold a call until the engine's timeout.
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import { outputStreams, type OutputStream } from '../../../schemas/output.ts';
import type { OutputChunk } from '../provider.ts';
import {
  assertOperationId,
  DEFAULT_READ_BYTES,
  type FinalReceipt,
  parseClaim,
  parseReceiptLine,
  parseStarted,
  receiptLine,
  type SpoolState,
} from '../spool.ts';
import { COMMAND_USER } from './container-spec.ts';
import { createExec, exitCodeOf, runToEnd, startAttached } from './docker-exec.ts';
import type { AppendSink, ReceiptFields, SpoolAccess } from './spool-access.ts';

const POLL_MS = 250;

/** Prints `name length mtime` then the content, for each of the protocol files that exist. */
const READ_STATE = `d=$1
for f in claim started receipt sizes; do
  [ -f "$d/$f" ] && [ ! -L "$d/$f" ] || continue
  c=$(cat "$d/$f"; echo x); c=\${c%x}
  printf '%s %s %s\\n%s' "$f" "\${#c}" "$(stat -c %y "$d/$f" 2>/dev/null)" "$c"
done`;

const SIZE_OF = `sz() { if [ -f "$1" ] && [ ! -L "$1" ]; then echo $(($(wc -c <"$1"))); else echo 0; fi; }`;

const CURRENT_SIZES = `${SIZE_OF}
for s in stdout stderr pty; do sz "$1/$s"; done`;

/** The first reader after the receipt freezes the sizes (O_EXCL via noclobber); everyone then reads the same. */
const FREEZE_SIZES = `${SIZE_OF}
set -C
printf '{"stdout":%s,"stderr":%s,"pty":%s}\\n' "$(sz "$1/stdout")" "$(sz "$1/stderr")" "$(sz "$1/pty")" >"$1/sizes" 2>/dev/null
[ -f "$1/sizes" ] && [ ! -L "$1/sizes" ] && cat "$1/sizes"`;

const READ_BYTES = `[ -f "$1" ] && [ ! -L "$1" ] || exit 0
tail -c +$(($2 + 1)) "$1" | head -c "$3"`;

const CREATE_EXCLUSIVE = `mkdir -p "$1" || exit 2
set -C
printf '%s' "$3" >"$1/$2" 2>/dev/null || exit 1`;

export class ExecSpoolAccess implements SpoolAccess {
  readonly via = 'exec' as const;
  private readonly receipts = new Map<string, FinalReceipt>();

  /** `control` for short calls; `streams` (no idle timeout) for the long-lived append of a terminal's output. */
  constructor(
    private readonly control: Docker.Container,
    private readonly streams: Docker.Container,
    private readonly root: string,
  ) {}

  async readState(operationId: string): Promise<SpoolState> {
    const files = await this.readFiles(operationId);
    const claimFile = files.get('claim');
    if (!claimFile) return {};
    const state: SpoolState = { claim: parseClaim(claimFile.text) };
    const startedFile = files.get('started');
    const started = startedFile && startedFile.text && parseStarted(startedFile.text, startedFile.at);
    if (started) state.started = started;
    const receipt = this.receipts.get(operationId) ?? (await this.finalReceipt(operationId, files));
    if (receipt) state.receipt = receipt;
    return state;
  }

  async readReceipt(operationId: string): Promise<FinalReceipt | undefined> {
    return this.receipts.get(operationId) ?? this.finalReceipt(operationId, await this.readFiles(operationId));
  }

  async currentSizes(operationId: string): Promise<Record<OutputStream, number>> {
    const { stdout } = await this.sh(CURRENT_SIZES, [this.dir(operationId)]);
    const [out, err, pty] = stdout.toString().trim().split('\n').map(Number);
    return { stdout: out || 0, stderr: err || 0, pty: pty || 0 };
  }

  async read(operationId: string, stream: OutputStream, cursor: number, maxBytes = DEFAULT_READ_BYTES): Promise<OutputChunk> {
    if (!Number.isSafeInteger(cursor) || cursor < 0) throw new BerthError('invalid_request', 'A cursor is a byte offset: an integer >= 0.', { cursor });
    const receipt = await this.readReceipt(operationId);
    // Past the receipt only the frozen size counts: bytes an escaped process appends later are never returned.
    const want = receipt ? Math.max(0, Math.min(maxBytes, receipt.sizes[stream] - cursor)) : maxBytes;
    const data = want === 0 ? Buffer.alloc(0) : (await this.sh(READ_BYTES, [`${this.dir(operationId)}/${stream}`, String(cursor), String(want)])).stdout;
    const next = cursor + data.length;
    return { data, next, closed: receipt !== undefined && next >= receipt.sizes[stream] };
  }

  async createExclusive(operationId: string, name: string, content: string): Promise<boolean> {
    const { exitCode, stderr } = await this.sh(CREATE_EXCLUSIVE, [this.dir(operationId), name, content], true);
    if (exitCode === 0) return true;
    if (exitCode === 1) return false;
    throw new BerthError('internal', `Cannot create the operation directory in the container: ${stderr.toString().trim()}`, { operationId });
  }

  async readText(operationId: string, name: string): Promise<string | undefined> {
    const { exitCode, stdout } = await this.sh('[ -f "$1" ] && [ ! -L "$1" ] && cat "$1" 2>/dev/null', [`${this.dir(operationId)}/${name}`], true);
    return exitCode === 0 ? stdout.toString('utf8') : undefined;
  }

  async marker(operationId: string, name: 'cancel' | 'timedout'): Promise<void> {
    await this.sh(': >"$1"', [`${this.dir(operationId)}/${name}`]);
  }

  async hasMarker(operationId: string, name: 'cancel' | 'timedout'): Promise<boolean> {
    return (await this.sh('[ -e "$1" ]', [`${this.dir(operationId)}/${name}`], true)).exitCode === 0;
  }

  async writeReceipt(operationId: string, receipt: ReceiptFields): Promise<void> {
    const path = `${this.dir(operationId)}/receipt`;
    await this.sh('printf "%s" "$2" >"$1.tmp" && mv "$1.tmp" "$1"', [path, receiptLine(receipt)]);
  }

  /** An attached `cat >>` in the container, fed in order; closing it waits until every byte is written. */
  async openAppend(operationId: string, name: OutputStream): Promise<AppendSink> {
    const exec = await createExec(
      this.streams,
      { cmd: ['/bin/sh', '-c', 'exec cat >>"$1"', 'berth-append', `${this.dir(operationId)}/${name}`], user: COMMAND_USER },
      { stdin: true, output: true },
    );
    const stream: Duplex = await startAttached(exec, false);
    const ended = new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', () => resolve());
    });
    stream.resume();
    return {
      write: (bytes) => void stream.write(bytes),
      close: async () => {
        stream.end();
        await ended;
        await exitCodeOf(exec);
      },
    };
  }

  async waitUntil<T>(
    _operationId: string,
    check: () => Promise<T | undefined>,
    timeoutMs: number,
    subscribe?: (wake: () => void) => () => void,
  ): Promise<T | undefined> {
    const deadline = Date.now() + timeoutMs;
    let wake: (() => void) | undefined;
    const unsubscribe = subscribe?.(() => wake?.());
    try {
      for (;;) {
        const result = await check();
        if (result !== undefined) return result;
        const left = deadline - Date.now();
        if (left <= 0) return undefined;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, POLL_MS));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      unsubscribe?.();
    }
  }

  async release(operationId: string): Promise<void> {
    this.receipts.delete(operationId);
    await this.sh('rm -rf "$1"', [this.dir(operationId)]);
  }

  private dir(operationId: string): string {
    assertOperationId(operationId);
    return `${this.root}/${operationId}`;
  }

  /** Runs a script as the command's user; a non-zero exit throws unless `tolerate`. */
  private async sh(script: string, args: string[], tolerate = false) {
    const result = await runToEnd(this.control, { cmd: ['/bin/sh', '-c', script, 'berth-spool', ...args], user: COMMAND_USER });
    if (result.exitCode !== 0 && !tolerate) {
      throw new BerthError('internal', `Spool access in the container failed: ${result.stderr.toString().trim()}`, { exitCode: result.exitCode });
    }
    return result;
  }

  private async readFiles(operationId: string): Promise<Map<string, { text: string; at: Date }>> {
    const raw = (await this.sh(READ_STATE, [this.dir(operationId)])).stdout.toString('utf8');
    const files = new Map<string, { text: string; at: Date }>();
    for (let i = 0; i < raw.length; ) {
      const eol = raw.indexOf('\n', i);
      if (eol < 0) break;
      const [name, length, ...mtime] = raw.slice(i, eol).split(' ');
      const text = raw.slice(eol + 1, eol + 1 + Number(length));
      files.set(name, { text, at: parseStatTime(mtime.join(' ')) });
      i = eol + 1 + Number(length);
    }
    return files;
  }

  private async finalReceipt(operationId: string, files: Map<string, { text: string; at: Date }>): Promise<FinalReceipt | undefined> {
    const file = files.get('receipt');
    const line = file && parseReceiptLine(file.text);
    if (!file || !line) return undefined;
    let sizesText = files.get('sizes')?.text;
    if (!sizesText?.endsWith('\n')) sizesText = (await this.sh(FREEZE_SIZES, [this.dir(operationId)])).stdout.toString();
    const parsed = JSON.parse(sizesText) as Partial<Record<OutputStream, number>>;
    const sizes = Object.fromEntries(outputStreams.map((s) => [s, parsed[s] ?? 0])) as Record<OutputStream, number>;
    const receipt: FinalReceipt = { ...line, exitedAt: file.at.toISOString(), sizes };
    this.receipts.set(operationId, receipt);
    return receipt;
  }
}

/** `stat -c %y`: "2026-11-29 10:01:20.143145253 +0000"; anything else reads as now. */
function parseStatTime(text: string): Date {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(\.\d+)? ([+-]\d\d)(\d\d)$/.exec(text.trim());
  if (!m) return new Date();
  const fraction = (m[3] ?? '.0').slice(0, 4);
  return new Date(`${m[1]}T${m[2]}${fraction}${m[4]}:${m[5]}`);
}
