/**
 * Retention (off unless the admin sets BERTH_RETENTION_DAYS): a released execution whose last change is older than
 * the policy's age loses its output artifacts (removed, or moved to the archive directory) and its stream is compacted
 * to one `execution.compacted` summary that keeps its record. Only released executions are touched; the machine
 * refuses the summary in any other state, so an unfinished actor never is.
 */
import { isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import { compactionSummary, type ExecutionContext } from '../../machines/execution.machine.ts';
import type { ArtifactArchive } from '../../store/artifact-archive.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import type { MaintenanceTask } from './maintenance-loop.ts';

const DAY_MS = 86_400_000;

/** The admin's policy (config.ts reads it from BERTH_RETENTION_*). */
export interface RetentionSettings {
  /** Age (since the execution's last change) past which it is compacted; fractions of a day are allowed. */
  days: number;
  /** Absolute directory (outside the data directory) aged artifacts are moved to; absent: they are removed. */
  archiveDir?: string;
}

export interface RetentionDeps {
  actors: () => ActorRuntime<any>;
  artifacts: ArtifactStore;
  /** Ids of released, not yet compacted executions last changed before `cutoff` (ms), oldest first, at most `limit`. */
  aged: (cutoff: number, limit: number) => string[];
  settings: RetentionSettings;
  archive?: ArtifactArchive;
  /** Executions one pass compacts at most (default 256): a pass is bounded whatever the backlog. */
  batch?: number;
}

/**
 * What one pass did, counting artifacts in `removed`/`archived`/`kept`. Kept: the empty one every empty stream shares,
 * and bytes a newer execution saved too (they go when it ages out).
 */
export interface RetentionReport {
  cutoff: number;
  compacted: number;
  removed: number;
  archived: number;
  kept: number;
  failed: number;
  lastError?: string;
}

/** Executions a pass could not compact that later passes step over, at most (tried again once nothing else is left). */
const FAILING_KEPT = 10_000;

export class Retention {
  private running?: Promise<RetentionReport>;
  /** Ids that failed (a refused archive, say): the oldest first, so without this they would fill every batch. */
  private readonly failing = new Set<string>();

  constructor(private readonly deps: RetentionDeps) {}

  /** One pass with the clock reading `now` (ms); a pass asked for while one runs joins it. */
  run(now: number): Promise<RetentionReport> {
    this.running ??= this.pass(now).finally(() => (this.running = undefined));
    return this.running;
  }

  task(): MaintenanceTask {
    return { name: 'retention', run: async (now) => void (await this.run(now.getTime())) };
  }

  private async pass(now: number): Promise<RetentionReport> {
    const cutoff = now - this.deps.settings.days * DAY_MS;
    const report: RetentionReport = { cutoff, compacted: 0, removed: 0, archived: 0, kept: 0, failed: 0 };
    const batch = this.deps.batch ?? 256;
    const aged = this.deps.aged(cutoff, batch + this.failing.size).filter((id) => !this.failing.has(id));
    if (aged.length === 0) this.failing.clear();
    for (const id of aged.slice(0, batch)) {
      try {
        if (await this.compact(id, cutoff, now, report)) report.compacted++;
      } catch (e) {
        // Left as it was; the report says why, and later passes go on with the others.
        report.failed++;
        report.lastError = isBerthError(e) ? e.message : String(e);
        if (this.failing.size < FAILING_KEPT) this.failing.add(id);
      }
    }
    return report;
  }

  /** Artifacts first, then the summary: a crash between leaves a released execution whose output reads as expired. */
  private async compact(id: string, cutoff: number, now: number, report: RetentionReport): Promise<boolean> {
    const actors = this.deps.actors();
    const view = await actors.get<ExecutionContext>('execution', id);
    // The read model may lag the actor: the actor's own state and clock decide.
    if (!view || view.state !== 'released' || view.context.updatedAt >= cutoff) return false;
    for (const ref of Object.values(view.context.artifacts ?? {})) {
      if (ref) report[await this.deps.artifacts.expire(ref, cutoff, this.deps.archive)]++;
    }
    const output = this.deps.archive ? 'archived' : 'removed';
    await actors.send('execution', id, compactionSummary(view, output, now), { compact: true });
    return true;
  }
}
