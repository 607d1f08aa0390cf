/** What an import reports: what landed, and what was dropped and why (bounded: a few example paths per reason). */
import type { SkipReason } from './member-policy.ts';

export interface SkippedReason {
  reason: SkipReason;
  count: number;
  /** Up to EXAMPLES_PER_REASON of the dropped paths, as the archive spelled them. */
  examples: string[];
}

export interface ImportResult {
  /** Files landed and their bytes. */
  files: number;
  bytes: number;
  skipped: number;
  skippedReasons: SkippedReason[];
  /** The single wrapping directory that was stripped, if there was one. */
  strippedPrefix?: string;
}

const EXAMPLES_PER_REASON = 10;

export class SkipTally {
  count = 0;
  private readonly byReason = new Map<SkipReason, SkippedReason>();

  add(path: string, reason: SkipReason): void {
    this.count++;
    let entry = this.byReason.get(reason);
    if (!entry) this.byReason.set(reason, (entry = { reason, count: 0, examples: [] }));
    entry.count++;
    if (entry.examples.length < EXAMPLES_PER_REASON) entry.examples.push(path);
  }

  reasons(): SkippedReason[] {
    return [...this.byReason.values()];
  }
}
