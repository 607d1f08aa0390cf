/**
 * Named crash points for the recovery tests, usable below the runtime layer (providers may not import it): a
 * process started with BERTH_CRASH_AT=<name>[#n] SIGKILLs itself the n-th (default first) time it reaches
 * `crashAt(name)`. A real kill between two physical steps (container created, not started), not a simulation;
 * unset, it costs one string compare.
 */
const [crashName, crashNth] = (process.env.BERTH_CRASH_AT ?? '').split('#');
let reached = 0;

export function crashAt(name: string): void {
  if (crashName && name === crashName && ++reached >= Number(crashNth ?? 1)) process.kill(process.pid, 'SIGKILL');
}
