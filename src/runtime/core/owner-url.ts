/**
 * Whether the URL another runtime announced may be given to a caller, who repeats its request there with its token
 * (owned_elsewhere, issue #17). A runtime that was killed never says it stopped: its stream still says `serving` at
 * that URL, and whatever binds the port next (on plain-HTTP loopback, any local user) would be handed the token. So
 * the URL is given only while the runtime may still be the one answering there: a runtime of this machine whose
 * process is gone (or whose pid another process has since taken) is provably not; a loopback URL of another machine
 * is never the caller's way there.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { RuntimeRow } from '../../projections/runtimes.projection.ts';
import { isLoopbackHost } from '../../providers/loopback-host.ts';

/** Clock ticks per second of /proc's times (USER_HZ, 100 on every Linux architecture). */
const USER_HZ = 100;
/** Rounding of the boot time (whole seconds) and of the two clocks: a process that started this much after is another. */
const START_SLACK_MS = 5_000;

const isLoopbackUrl = (url: string): boolean => {
  try {
    return isLoopbackHost(new URL(url).hostname.replace(/^\[|\]$/g, ''));
  } catch {
    return false;
  }
};

/** Whether a process `pid` exists (one of another user's counts: EPERM). */
function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** When process `pid` started (ms since the epoch), from /proc; undefined where /proc does not say. */
function startedAt(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return undefined;
    return btime * 1000 + (ticks * 1000) / USER_HZ;
  } catch {
    return undefined;
  }
}

/** The URL a caller may be sent to for an actor `row`'s runtime owns, or undefined. */
export function ownerUrl(row: RuntimeRow | undefined, here: string = hostname()): string | undefined {
  if (row?.state !== 'serving' || !row.url) return undefined;
  if (row.hostname !== here) return isLoopbackUrl(row.url) ? undefined : row.url;
  if (!alive(row.pid)) return undefined;
  // The runtime's process started before it fenced its epoch: one that started later took over a dead one's pid.
  const started = startedAt(row.pid);
  if (started !== undefined && started > row.startedAt + START_SLACK_MS) return undefined;
  return row.url;
}
