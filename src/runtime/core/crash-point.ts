/**
 * Fault injection for the recovery tests: a runtime started with BERTH_CRASH_AFTER=<event type>[#n] SIGKILLs itself
 * right after the n-th (default first) append of that event type is acknowledged, i.e. after the intent is durable and
 * before its effect runs. A real kill at a precise point, not a simulated crash; unset, it costs one string compare.
 */
const [crashType, crashNth] = (process.env.BERTH_CRASH_AFTER ?? '').split('#');
let seen = 0;

export function crashAfterAppend(types: readonly string[]): void {
  if (!crashType) return;
  for (const type of types) {
    if (type === crashType && ++seen >= Number(crashNth ?? 1)) process.kill(process.pid, 'SIGKILL');
  }
}
