/**
 * Shared by the native executor specs: a temporary spool, an executor over it, and helpers that follow an operation
 * to its receipt and collect a stream through the public cursor API.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Profile } from '../../schemas/profile.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { findBubblewrap } from '../../src/providers/native/bubblewrap.ts';
import { NativeExecutor } from '../../src/providers/native/native-executor.ts';
import { dropSandboxSpares, sparesSettled } from '../../src/providers/native/supervisor-launcher.ts';
import type { OutputStream } from '../../schemas/output.ts';
import type { ExecSpec, Executor, Receipt } from '../../src/providers/provider.ts';

export interface Fixture {
  root: string;
  spoolDir: string;
  executor: NativeExecutor;
  /** Resolves once the allocation's spare sandboxes ended and the fixture's directory is gone. */
  cleanup(): Promise<void>;
}

export function nativeFixture(profile: Profile = { provider: 'native' }, graceMs = 500): Fixture {
  const root = mkdtempSync(join(tmpdir(), 'berth-native-'));
  const spoolDir = join(root, 'spool', 'alloc-1');
  const executor = new NativeExecutor({ spoolDir, profile, graceMs, hidden: [join(root, 'spool')] });
  // A spare sandbox of the allocation may be making its output directory in the spool as it goes: once any spare due
  // is made, the allocation's are told to end and waited for (on a busy host one made its directory after the
  // removal's retries: ENOTEMPTY), then the removal retries whatever is left.
  const cleanup = async () => {
    await sparesSettled();
    await dropSandboxSpares(spoolDir);
    rmSync(root, { recursive: true, force: true, maxRetries: 5 });
  };
  return { root, spoolDir, executor, cleanup };
}

let counter = 0;
export function spec(command: string[], extra: Partial<ExecSpec> = {}): ExecSpec {
  return { operationId: `op-${process.pid}-${++counter}`, command, env: commandEnv(), stdin: false, ...extra };
}

export async function untilExited(executor: Executor, operationId: string, timeoutMs = 30_000): Promise<Receipt> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await executor.status(operationId);
    if (receipt.state === 'exited') return receipt;
    if (Date.now() > deadline) throw new Error(`operation ${operationId} still ${receipt.state} after ${timeoutMs} ms`);
    await executor.waitForChange(operationId, 1000);
  }
}

/** Follows one stream from cursor 0 until it is closed. */
export async function collect(executor: Executor, operationId: string, stream: OutputStream, maxBytes?: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let cursor = 0;
  for (;;) {
    const chunk = await executor.read(operationId, stream, cursor, maxBytes);
    parts.push(chunk.data);
    cursor = chunk.next;
    if (chunk.closed) return Buffer.concat(parts);
    if (chunk.data.length === 0) await executor.waitForChange(operationId, 1000, { [stream]: cursor });
  }
}

export async function run(executor: Executor, s: ExecSpec): Promise<{ receipt: Receipt; stdout: Buffer; stderr: Buffer }> {
  await executor.submit(s);
  const [stdout, stderr] = await Promise.all([collect(executor, s.operationId, 'stdout'), collect(executor, s.operationId, 'stderr')]);
  return { receipt: await untilExited(executor, s.operationId), stdout, stderr };
}

/** Whether `pid` is a live process (a zombie is dead: orphans may never be reaped on this host). */
export function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/** The native launcher of this process (its only child running launcher.sh), if one runs. */
export function launcherPid(): number | undefined {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher.sh')) return Number(pid);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** Live (non-zombie) processes whose command line contains `marker`. */
export function liveProcessesWith(marker: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmdline.includes(marker)) found.push(`${pid} ${cmdline}`);
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

/**
 * bwrap for containment specs: absent means skip with a visible line, unless BERTH_REQUIRE_BWRAP=1 makes it a
 * failure.
 */
export function bwrapOrSkip(): string | undefined {
  const bwrap = findBubblewrap();
  if (!bwrap) {
    if (process.env.BERTH_REQUIRE_BWRAP === '1') throw new Error('bubblewrap (bwrap) is required (BERTH_REQUIRE_BWRAP=1) and not installed');
    console.warn('SKIPPED: bubblewrap (bwrap) is not installed; containment specs do not run (apt-get install -y bubblewrap)');
  }
  return bwrap;
}
