/**
 * The maintenance loop (DESIGN §11): every interval, runs each registered task (reconciliation, idle reclamation,
 * lease checks) with the time it read, one tick at a time. Machines hold no timers, so this is where time reaches
 * them: a task sends events carrying `now`. `stop` lets a running tick finish (drains) and starts no new one.
 */
import { pino, type Logger } from 'pino';

export interface MaintenanceTask {
  name: string;
  run(now: Date): Promise<void>;
}

export interface MaintenanceLoopOptions {
  intervalMs: number;
  logger?: Logger;
  /** The clock read at each tick (tests pass their own). */
  now?: () => Date;
}

export class MaintenanceLoop {
  /** Completed ticks, and task runs that threw. */
  readonly stats = { ticks: 0, failures: 0 };
  private readonly tasks: MaintenanceTask[] = [];
  private readonly intervalMs: number;
  private readonly log: Logger;
  private readonly now: () => Date;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(opts: MaintenanceLoopOptions) {
    this.intervalMs = opts.intervalMs;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.now = opts.now ?? (() => new Date());
  }

  add(task: MaintenanceTask): this {
    this.tasks.push(task);
    return this;
  }

  /** Schedules ticks every interval; the next tick is scheduled only once the previous one has finished. */
  start(): void {
    if (this.stopped || this.timer) return;
    const schedule = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.tick().finally(schedule), this.intervalMs);
      this.timer.unref();
    };
    schedule();
  }

  /** Runs one tick now (or joins the one under way). A failing task is logged; the others still run. */
  tick(): Promise<void> {
    if (this.running) return this.running;
    this.running = (async () => {
      const now = this.now();
      for (const task of this.tasks) {
        if (this.stopped) break;
        try {
          await task.run(now);
        } catch (err) {
          this.stats.failures++;
          this.log.error({ err, task: task.name }, 'maintenance task failed');
        }
      }
      this.stats.ticks++;
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Stops scheduling and waits for the tick under way, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
