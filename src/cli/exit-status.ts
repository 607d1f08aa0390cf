/**
 * The exit code a CLI command that ran something passes through, like `docker exec` and `timeout`: the command's own
 * code (127 not found, 126 not executable, as its shell says); 124 when its timeout ended it; 128+n when signal n
 * ended it; 130 when it was cancelled; 125 when Berth could not run it or its outcome is unknown.
 */
import { constants } from 'node:os';

export const FAILED_EXIT = 125;
export const TIMED_OUT_EXIT = 124;

export interface FinalRecord {
  status: string;
  exitCode?: number | null;
  signal?: string | null;
  timedOut?: boolean;
  failure?: { message: string };
}

export function exitStatusOf(record: FinalRecord): { code: number; complaint?: string } {
  if (record.status === 'failed' || record.status === 'unknown') {
    const what = record.status === 'failed' ? 'could not start' : 'has an unknown outcome';
    return { code: FAILED_EXIT, complaint: `the command ${what}${record.failure ? `: ${record.failure.message}` : ''}` };
  }
  if (record.timedOut) return { code: TIMED_OUT_EXIT, complaint: 'the command timed out' };
  if (typeof record.exitCode === 'number') return { code: record.exitCode };
  // Cancelling sends a signal: the caller asked for it, so it is Ctrl-C's 130 rather than 128+n of that signal.
  if (record.status === 'cancelled') return { code: 130 };
  const signal = record.signal ? constants.signals[record.signal as NodeJS.Signals] : undefined;
  if (signal) return { code: 128 + signal };
  return { code: FAILED_EXIT };
}
