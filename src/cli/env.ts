/**
 * `berth env create|ls|acquire|release|rm`: Environments and their allocations through the runtime API, in this
 * process, against the data directory (before the gateway exists, and for scripts). Each command starts the runtime
 * (a new epoch: recovery reconciles first), does its one thing and stops it. Do not run it while `berth serve` uses
 * the same data directory: two runtimes would reconcile the same allocations.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { Profile } from '../../schemas/profile.ts';
import { startBerth, type Berth } from '../runtime/berth.ts';
import { loadConfig } from '../runtime/config.ts';
import type { AllocationView, Caller, EnvironmentView } from '../runtime/runtime-api.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { envRemote } from './env-remote.ts';
import { createLogger } from './logger.ts';
import { namesServer, remoteOptions, remoteUsage } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

export const envUsage = `usage: berth env create NAME [--provider native|docker] [--image IMAGE] [--memory-mb N] [--cpus N]
                        [--pids-limit N] [--network none|bridge] [--idle-seconds N] [--reuse session|workspace|scope]
                        [--contain] [--description TEXT]
       berth env ls
       berth env acquire ENV
       berth env release ENV [ALLOCATION_ID]
       berth env rm ENV
  ENV is an environment id (henv_…) or slug. Common flags: --scope SCOPE (default "default"), --json, --data-dir DIR,
  --store SPEC. Runs the runtime in this process; not while \`berth serve\` uses the same data directory.
  With --url (or BERTH_URL) it asks that server instead, in the token's scope (no --scope, --data-dir or --store):
${remoteUsage}`;

const options = {
  ...storeOptions,
  ...remoteOptions,
  scope: { type: 'string' },
  json: { type: 'boolean' },
  provider: { type: 'string' },
  image: { type: 'string' },
  'memory-mb': { type: 'string' },
  cpus: { type: 'string' },
  'pids-limit': { type: 'string' },
  network: { type: 'string' },
  'idle-seconds': { type: 'string' },
  reuse: { type: 'string' },
  contain: { type: 'boolean' },
  description: { type: 'string' },
} as const;

export type EnvValues = ReturnType<typeof parseCommandArgs<typeof options>>['values'];

const subcommands = ['create', 'ls', 'acquire', 'release', 'rm'] as const;
export type Subcommand = (typeof subcommands)[number];

/** How many positionals (after the subcommand) each one takes: [min, max]. */
const arity: Record<Subcommand, [number, number]> = { create: [1, 1], ls: [0, 0], acquire: [1, 1], release: [1, 2], rm: [1, 1] };

export async function envCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, options, envUsage);
  if (values.help) return void console.log(envUsage), 0;
  const [sub, ...args] = positionals;
  if (!subcommands.includes(sub as Subcommand)) throw new UsageError(sub ? `unknown env command "${sub}"` : 'name an env command', envUsage);
  const [min, max] = arity[sub as Subcommand];
  if (args.length < min || args.length > max) throw new UsageError(`wrong number of arguments for env ${sub}`, envUsage);
  const profile = sub === 'create' ? profileOf(values) : undefined;
  if (namesServer(argv)) return envRemote(sub as Subcommand, args, values, profile);

  const config = loadConfig({ dataDir: values['data-dir'], store: values.store });
  const caller: Caller = { scope: values.scope ?? 'default', role: 'admin' };
  const berth = await startBerth({ settings: config, runtimeId: config.runtimeId, logger: createLogger({ level: process.env.BERTH_LOG_LEVEL ?? 'warn' }) });
  try {
    const print = (x: EnvironmentView | AllocationView) => writeLine(values.json ? JSON.stringify(x) : describe(x));
    const api = berth.api;
    switch (sub as Subcommand) {
      case 'create':
        await print(
          await api.createEnvironment(caller, {
            name: args[0],
            profile: profile!,
            ...(values.description !== undefined ? { description: values.description } : {}),
          }),
        );
        break;
      case 'ls':
        for (const e of await api.listEnvironments(caller)) await print(e);
        break;
      case 'acquire':
        await print(await api.acquire(caller, await resolveId(berth, caller, args[0])));
        break;
      case 'release': {
        const id = await resolveId(berth, caller, args[0]);
        const allocationId = args[1] ?? (await api.getEnvironment(caller, id)).allocation?.allocationId;
        if (!allocationId) throw new BerthError('invalid_state', 'The environment has no allocation to release.', { environmentId: id });
        await print(await api.release(caller, id, allocationId));
        break;
      }
      case 'rm':
        await api.deleteEnvironment(caller, await resolveId(berth, caller, args[0]));
        break;
    }
  } finally {
    await berth.stop();
  }
  return 0;
}

/** The profile from the flags; the runtime validates it (and names the provider if it is not registered). */
function profileOf(values: EnvValues): Partial<Profile> {
  const number = (flag: keyof EnvValues): number | undefined => {
    const raw = values[flag];
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (typeof raw !== 'string' || raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag} takes a number, not "${raw}"`, envUsage);
    return n;
  };
  const fields = {
    provider: values.provider,
    image: values.image,
    memoryMb: number('memory-mb'),
    cpus: number('cpus'),
    pidsLimit: number('pids-limit'),
    network: values.network,
    idleSeconds: number('idle-seconds'),
    reuse: values.reuse,
    contain: values.contain,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<Profile>;
}

/** An id names itself; anything else is a slug of the caller's scope. */
async function resolveId(berth: Berth, caller: Caller, ref: string): Promise<string> {
  if (ref.startsWith('henv_')) return ref;
  const found = (await berth.api.listEnvironments(caller)).find((e) => e.slug === ref);
  if (!found) throw new BerthError('environment_not_found', `No environment has the slug "${ref}".`, { slug: ref });
  return found.id;
}

export function describe(x: EnvironmentView | AllocationView): string {
  if ('object' in x) {
    const a = x.allocation ? ` ${x.allocation.allocationId} gen ${x.allocation.generation} ${x.allocation.state}` : '';
    return `${x.id}  ${x.slug}  ${x.profile.provider}  ${String(x.state)}  ${x.availability}${a}`;
  }
  const resource = x.identity ? ` ${x.identity.resourceId.slice(0, 12)}` : '';
  return `${x.allocationId}  ${x.environmentId}  gen ${x.generation}  ${x.state}  ${x.provider}/${x.ownership}${resource}  uses ${x.uses.length}`;
}
