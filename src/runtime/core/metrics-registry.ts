/**
 * One Berth's Prometheus registry (prom-client, never its global one): the families Berth's modules register, checked
 * against the naming conventions when they are made, exposed together with the process's own metrics.
 *
 * Adding a family: take the Berth's `BerthMetrics` (`runtime.metrics`) and call `counter`, `gauge` or `histogram`
 * once, where the module that observes it is built, with a `berth_` name in base units (a counter ends `_total`, a
 * duration histogram `_seconds`, a size one `_bytes`), a HELP sentence and the label names. Label values are small
 * closed sets (a state, a result, a kind), never an id. A gauge read from somewhere else sets itself in `collect`.
 * Then add a row to the README's Metrics table: test/integration/metrics.spec.ts fails for a family missing there.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type GaugeConfiguration } from 'prom-client';

/** Durations from a millisecond to about two minutes (an image pull, a build). */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

interface FamilyConfig<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

/**
 * The process's own metrics (CPU, memory, handles, event loop, GC) under prom-client's standard names
 * (`process_*`, `nodejs_*`), so stock Node.js dashboards read them: one registry per process, shared by every Berth
 * in it, because they describe the process, and collecting them twice would start a second event-loop monitor.
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class BerthMetrics {
  readonly registry = new Registry();

  counter<L extends string = never>(config: FamilyConfig<L>): Counter<L> {
    conventional(config.name, /_total$/, 'a counter ends _total');
    return new Counter({ ...config, labelNames: config.labelNames ?? [], registers: [this.registry] });
  }

  gauge<L extends string = never>(config: FamilyConfig<L> & Pick<GaugeConfiguration<L>, 'collect'>): Gauge<L> {
    conventional(config.name, /(?<!_total)$/, 'a gauge does not end _total');
    return new Gauge({ ...config, labelNames: config.labelNames ?? [], registers: [this.registry] });
  }

  histogram<L extends string = never>(config: FamilyConfig<L> & { buckets?: number[] }): Histogram<L> {
    conventional(config.name, /_(seconds|bytes)$/, 'a histogram is in seconds or bytes');
    return new Histogram({ buckets: DURATION_BUCKETS, ...config, labelNames: config.labelNames ?? [], registers: [this.registry] });
  }

  /** The family registered under `name` (so a module can observe one that another registered). */
  family<M>(name: string): M {
    const found = this.registry.getSingleMetric(name);
    if (!found) throw new Error(`no metric family ${name} is registered`);
    return found as M;
  }

  /**
   * The Prometheus text exposition: this Berth's families, then the process's. The two texts are joined as they are
   * (the format is a sequence of families, and no name is in both: every family here starts berth_), instead of
   * merging the registries into a new one on every scrape.
   */
  async text(): Promise<string> {
    const [own, ofProcess] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return `${own}\n${ofProcess}`;
  }
}

function conventional(name: string, shape: RegExp, rule: string): void {
  if (!/^berth_[a-z][a-z0-9_]*$/.test(name) || !shape.test(name)) throw new Error(`metric family ${name} breaks the naming conventions: berth_ prefix, snake case, ${rule}`);
}
