/**
 * The exit code a CLI command that ran something passes through, like `docker exec`: the command's own code; 128+n
 * when signal n ended it; 130 when it was cancelled; 125 when it could not start or its outcome is unknown.
 */
import { constants } from 'node:os';

export const FAILED_EXIT = 125;

export interface FinalRecord {
  status: string;
  exitCode?: number | null;
  signal?: string | null;
  failure?: { message: string };
}

export function exitStatusOf(record: FinalRecord): { code: number; complaint?: string } {
  if (record.status === 'failed' || record.status === 'unknown') {
    const what = record.status === 'failed' ? 'could not start' : 'has an unknown outcome';
    return { code: FAILED_EXIT, complaint: `the command ${what}${record.failure ? `: ${record.failure.message}` : ''}` };
  }
  if (typeof record.exitCode === 'number') return { code: record.exitCode };
  const signal = record.signal ? constants.signals[record.signal as NodeJS.Signals] : undefined;
  if (signal) return { code: 128 + signal };
  return { code: record.status === 'cancelled' ? 130 : FAILED_EXIT };
}
