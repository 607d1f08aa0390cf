/**
 * Host process facts from Linux /proc, for the native executor: whether a claim's owner still runs (fenced against
 * pid reuse), and the members of a session or process group, so a tree can be stopped and proven gone.
 */
import { readFileSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';

interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** Clock ticks since boot: with the pid, a process identity that survives pid reuse. */
  startTime: string;
}

function parseStat(pid: number | string, text: string): ProcStat {
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid: Number(pid), state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]), startTime: fields[19] };
}

/**
 * One process's stat, read synchronously: a /proc read costs microseconds, and it sits on the execution path (is
 * the owner of a claim alive?), where a thread-pool round trip costs far more on a busy host.
 */
function procStat(pid: number | string): ProcStat | undefined {
  try {
    return parseStat(pid, readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Every process's stat: many reads, so asynchronous. */
async function procStatAsync(pid: string): Promise<ProcStat | undefined> {
  try {
    return parseStat(pid, await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

export async function processStartTime(pid: number): Promise<string | undefined> {
  return procStat(pid)?.startTime;
}

/** A live (not zombie) process whose start time is `startTime`. */
export async function isProcessAlive(pid: number, startTime?: string): Promise<boolean> {
  const st = procStat(pid);
  return st !== undefined && st.state !== 'Z' && (startTime === undefined || st.startTime === startTime);
}

/** A live (not zombie) child of `parent`: a pid reused since under another parent does not count. */
export function isLiveChildOf(pid: number, parent: number): boolean {
  const st = procStat(pid);
  return st !== undefined && st.state !== 'Z' && st.ppid === parent;
}

/** A live supervisor of `opDir`: its command line names the operation directory, so a reused pid does not count. */
export async function isSupervisorAlive(pid: number, opDir: string): Promise<boolean> {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return argv.includes(opDir) && (await isProcessAlive(pid));
  } catch {
    return false;
  }
}

/** Live (not zombie) processes in session `sid` or process group `pgid`. */
export async function liveMembers(which: { session?: number; pgid?: number }): Promise<number[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  const stats = await Promise.all(pids.map((pid) => procStatAsync(pid)));
  return stats
    .filter((st): st is ProcStat => st !== undefined && st.state !== 'Z')
    .filter((st) => st.session === which.session || st.pgrp === which.pgid)
    .map((st) => st.pid);
}

/** Whether a live member of session `sid` has stdout or stderr open on one of `paths` (the operation's spool files). */
export async function sessionWritesTo(sid: number, paths: string[]): Promise<boolean> {
  for (const pid of await liveMembers({ session: sid })) {
    for (const fd of [1, 2]) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => undefined);
      if (target !== undefined && paths.includes(target)) return true;
    }
  }
  return false;
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * Stops every process of session `sid` (a run's whole tree, process groups made by job control included): `first`
 * signal, then SIGKILL after `graceMs`, until none is left. The leader `sid` itself is signalled too: right after
 * it was started it may not have made its session yet.
 */
export async function stopSession(sid: number, graceMs: number, first: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const members = async (): Promise<number[]> => {
    const inSession = await liveMembers({ session: sid });
    return inSession.includes(sid) || !(await isProcessAlive(sid)) ? inSession : [sid, ...inSession];
  };
  signalAll(await members(), first);
  const deadline = Date.now() + graceMs;
  for (;;) {
    const left = await members();
    if (left.length === 0) return;
    if (Date.now() >= deadline) signalAll(left, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 20));
  }
}
