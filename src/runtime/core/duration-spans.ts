/**
 * The latency histograms Berth's users watch (allocate, command start, checkpoint, build), measured between the
 * durable events that open and close each span as this process appends them: what a caller waits for is exactly
 * the time between those records. A span opened before a restart is not measured (its start is not in this process).
 */
import type { Histogram } from 'prom-client';
import type { EventData } from '../../store/event-store.ts';
import type { BerthMetrics } from './metrics-registry.ts';

/** Labels to observe the span with; `open` while it goes on (an allocation still pending), `drop` when it ended unmeasured. */
type Ending = Record<string, string> | 'open' | 'drop';

interface SpanRule {
  name: string;
  help: string;
  labelNames: string[];
  /** The event that opens the span. */
  start: string;
  /** What each closing event type makes of the span (absent types leave it as it is). */
  ends: Record<string, (data: any) => Ending>;
  /** Spans of one stream at once are told apart by the attempt (checkpoints). */
  attempt?: (data: any) => string;
  /** Series shown at zero before the first observation (a closed set known up front). */
  series?: Record<string, string>[];
}

const finished = (result: string) => () => ({ result });
const viewCheckpoint = (result: string) => () => ({ view: 'mount', result });
const drop = (): Ending => 'drop';

const RULES: SpanRule[] = [
  {
    name: 'berth_allocate_seconds',
    help: 'Time from an allocation intent to its allocation ready (start="cold": a provider made it; "warm": claimed from a warm pool).',
    labelNames: ['start'],
    series: [{ start: 'cold' }, { start: 'warm' }],
    start: 'allocation.intended',
    ends: {
      // Pending or unknown: inspection goes on, and the wait with it.
      'allocation.reported': (d: { report: { status: string } }) => (d.report.status === 'ready' ? { start: 'cold' } : ['pending', 'unknown'].includes(d.report.status) ? 'open' : 'drop'),
      'allocation.release_requested': drop,
    },
  },
  {
    name: 'berth_command_start_seconds',
    help: 'Time from a command accepted to its process running.',
    labelNames: [],
    start: 'execution.accepted',
    ends: { 'execution.started': () => ({}), 'execution.failed': drop, 'execution.unknown': drop, 'execution.exited': drop },
  },
  {
    name: 'berth_checkpoint_seconds',
    help: 'Time to checkpoint a workspace (view="mount": an allocation\'s view, from the attempt recorded; "directory": the workspace directory), by result published, stale or failed.',
    labelNames: ['view', 'result'],
    start: 'mount.checkpoint_started',
    ends: { 'mount.checkpoint_published': viewCheckpoint('published'), 'mount.checkpoint_stale': viewCheckpoint('stale'), 'mount.checkpoint_failed': viewCheckpoint('failed') },
    attempt: (d: { attemptId: string }) => d.attemptId,
  },
  {
    name: 'berth_build_seconds',
    help: 'Time to build an environment content version, from requested to succeeded or failed.',
    labelNames: ['result'],
    start: 'build.requested',
    ends: { 'build.succeeded': finished('succeeded'), 'build.failed': finished('failed') },
  },
];

/** The rules each event type starts or ends, so an append looks up its types instead of scanning every rule. */
const RULES_BY_TYPE = new Map<string, SpanRule[]>();
for (const rule of RULES) {
  for (const type of new Set([rule.start, ...Object.keys(rule.ends)])) RULES_BY_TYPE.set(type, [...(RULES_BY_TYPE.get(type) ?? []), rule]);
}

/** Open spans kept at most: a flood of work that never ends cannot grow this without bound (the oldest go unmeasured). */
const MAX_OPEN = 10_000;

export class DurationSpans {
  private readonly open = new Map<string, number>();
  private readonly histograms: Map<SpanRule, Histogram<string>>;

  constructor(metrics: BerthMetrics) {
    this.histograms = new Map(
      RULES.map((r) => {
        const h = metrics.histogram({ name: r.name, help: r.help, labelNames: r.labelNames });
        for (const labels of r.series ?? []) h.zero(labels);
        return [r, h];
      }),
    );
  }

  /** Called once `events` are durable in `stream` (on every append: one map lookup for an event no rule names). */
  appended(stream: string, events: EventData[]): void {
    const now = performance.now();
    for (const e of events) {
      for (const rule of RULES_BY_TYPE.get(e.type) ?? []) {
        const end = rule.ends[e.type];
        const key = `${rule.name} ${stream} ${rule.attempt?.(e.data) ?? ''}`;
        if (e.type === rule.start) {
          this.open.set(key, now);
          if (this.open.size > MAX_OPEN) this.open.delete(this.open.keys().next().value!);
          continue;
        }
        const started = this.open.get(key);
        if (started === undefined) continue;
        const ending = end!(e.data);
        if (ending === 'open') continue;
        this.open.delete(key);
        if (ending !== 'drop') this.histograms.get(rule)!.observe(ending, (now - started) / 1000);
      }
    }
  }
}

/** For the warm pools: a claim of a ready allocation took `seconds`, from the request to the allocation handed over. */
export function observeWarmClaim(metrics: BerthMetrics, seconds: number): void {
  metrics.family<Histogram<'start'>>('berth_allocate_seconds').observe({ start: 'warm' }, seconds);
}

/** For a checkpoint of a workspace directory (no view, so no attempt event opens a span): it took `seconds`. */
export function observeDirectoryCheckpoint(metrics: BerthMetrics, result: 'published' | 'stale' | 'failed', seconds: number): void {
  metrics.family<Histogram<'view' | 'result'>>('berth_checkpoint_seconds').observe({ view: 'directory', result }, seconds);
}
