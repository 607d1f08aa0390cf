/**
 * `berth env …`: Environments, their allocations and their content, as one table of subcommands over the
 * EnvironmentCommands port. The server found by remote.ts answers (env-remote.ts); only when there is none does the
 * runtime run in this process on the data directory (env-in-process.ts).
 */
import { BerthError } from '../../schemas/errors.ts';
import type { Profile } from '../../schemas/profile.ts';
import type { Allocation, Environment } from '../client/berth-client.ts';
import { everyItem } from '../client/pages.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { describeImport, describeVersion, followBuild, pushDirectory } from './env-content.ts';
import { openInProcess } from './env-in-process.ts';
import { remoteEnvironmentCommands } from './env-remote.ts';
import type { EnvironmentCommands } from './environment-commands.ts';
import { findServer, remoteOptions, withServer } from './remote.ts';
import { writeLine } from './stdout-lines.ts';
import { table as textTable } from './text-table.ts';
import { envUsage } from './usage.ts';


const profileFlags = ['provider', 'image', 'memory-mb', 'cpus', 'pids-limit', 'network', 'idle-seconds', 'reuse', 'contain', 'description'] as const;
const inProcessFlags = ['scope', 'store'] as const;

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
  replace: { type: 'boolean' },
  follow: { type: 'boolean' },
} as const;

type EnvValues = ReturnType<typeof parseCommandArgs<typeof options>>['values'];
type Flag = (typeof profileFlags)[number] | 'replace' | 'follow';

interface Subcommand {
  /** How many positionals follow the subcommand: [min, max]. */
  arity: [number, number];
  /** Flags of this subcommand beyond the common ones (--json and the in-process or server flags). */
  flags?: readonly Flag[];
  /** A content command (push, build, versions, activate): the target must implement environment content. */
  content?: boolean;
  /** Checks the command line (before anything starts) and returns what runs it; answers the exit code. */
  prepare(args: string[], values: EnvValues): (port: EnvironmentCommands, print: Print) => Promise<number | void>;
}

type Print = (json: unknown, text: string) => Promise<void>;

const ref = (port: EnvironmentCommands, name: string) => port.resolve(name);

const table: Record<string, Subcommand> = {
  create: {
    arity: [1, 1],
    flags: profileFlags,
    prepare: ([name], values) => {
      const profile = profileOf(values);
      const { description } = values;
      return async (port, print) => {
        const created = await port.create({ name: name!, profile, ...(description !== undefined ? { description } : {}) });
        await print(created, describeEnvironment(created));
      };
    },
  },
  ls: {
    arity: [0, 0],
    prepare: (_, values) => async (port, print) => {
      if (values.json) {
        for await (const e of everyItem(port.page)) await print(e, '');
        return;
      }
      const rows: string[][] = [];
      for await (const e of everyItem(port.page)) rows.push([e.id, e.name, e.profile.provider, String(e.state), e.availability, e.allocation?.allocationId ?? '-']);
      await textTable(['ENVIRONMENT', 'NAME', 'PROVIDER', 'STATE', 'AVAILABILITY', 'ALLOCATION'], rows);
    },
  },
  show: {
    arity: [1, 1],
    prepare: ([name]) => async (port, print) => {
      const environment = await port.get(await ref(port, name!));
      await print(environment, describeEnvironment(environment));
    },
  },
  acquire: {
    arity: [1, 1],
    prepare: ([name]) => async (port, print) => {
      const allocation = await port.acquire(await ref(port, name!));
      await print(allocation, describeAllocation(allocation));
    },
  },
  release: {
    arity: [1, 2],
    prepare: ([name, given]) => async (port, print) => {
      const id = await ref(port, name!);
      const allocationId = given ?? (await port.get(id)).allocation?.allocationId;
      if (!allocationId) throw new BerthError('invalid_state', 'The environment has no allocation to release.', { environmentId: id });
      const released = await port.release(id, allocationId);
      await print(released, describeAllocation(released));
    },
  },
  rm: {
    arity: [1, 1],
    prepare: ([name]) => async (port) => port.remove(await ref(port, name!)),
  },
  push: {
    arity: [2, 2],
    flags: ['replace'],
    content: true,
    prepare: ([name, dir], values) => async (port, print) => {
      const result = await pushDirectory(port, await ref(port, name!), dir!, values.replace ?? false);
      await print(result, describeImport(result));
    },
  },
  build: {
    arity: [1, 1],
    flags: ['follow'],
    content: true,
    prepare: ([name], values) => async (port, print) => {
      const id = await ref(port, name!);
      const started = await port.startBuild(id);
      if (!values.follow) return print(started, `version ${started.version} ${started.status}`);
      const record = await followBuild(port, id, started.version);
      await print(record, `version ${record.version} ${record.status}${record.error ? `: ${record.error}` : ''}`);
      return record.status === 'ready' ? 0 : 1;
    },
  },
  versions: {
    arity: [1, 1],
    content: true,
    prepare: ([name], values) => async (port) => {
      const list = await port.versions(await ref(port, name!));
      if (values.json) await writeLine(JSON.stringify(list));
      else for (const v of list.versions) await writeLine(describeVersion(v));
    },
  },
  activate: {
    arity: [2, 2],
    content: true,
    prepare: ([name, given]) => {
      const version = Number(given);
      if (!Number.isSafeInteger(version) || version < 1) throw new UsageError(`a version is a positive integer, not "${given}"`, envUsage);
      return async (port, print) => {
        const list = await port.activate(await ref(port, name!), version);
        await print(list, `version ${list.active} active`);
      };
    },
  },
};

export async function envCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, options, envUsage);
  if (values.help) return void console.log(envUsage), 0;
  const [sub, ...args] = positionals;
  const subcommand = sub === undefined ? undefined : table[sub];
  if (!subcommand) throw new UsageError(sub ? `unknown env command "${sub}"` : 'name an env command', envUsage);
  const [min, max] = subcommand.arity;
  if (args.length < min || args.length > max) throw new UsageError(`wrong number of arguments for env ${sub}`, envUsage);
  for (const flag of [...profileFlags, 'replace', 'follow'] as const) {
    if (values[flag] !== undefined && !subcommand.flags?.includes(flag)) throw new UsageError(`--${flag} is not an option of env ${sub}`, envUsage);
  }
  const run = subcommand.prepare(args, values);
  const print: Print = (json, text) => writeLine(values.json ? JSON.stringify(json) : text);
  const runOn = async (port: EnvironmentCommands) => {
    try {
      if (subcommand.content && port.contentUnavailable) throw new BerthError('not_found', port.contentUnavailable);
      return (await run(port, print)) ?? 0;
    } finally {
      await port.close();
    }
  };
  const inProcessFlag = inProcessFlags.find((f) => values[f] !== undefined);
  const server = await findServer(values);
  if (server) {
    if (inProcessFlag) throw new UsageError(`--${inProcessFlag} is for a runtime in this process, but a server answers at ${server.url} (in the token's scope)`, envUsage);
    return withServer(values, (berth, url) => runOn(remoteEnvironmentCommands(berth, url)), server);
  }
  if (values.token !== undefined) throw new UsageError('--token is for a server, and none holds the data directory: name it with --url (or BERTH_URL)', envUsage);
  return runOn(await openInProcess({ dataDir: values['data-dir'], store: values.store, scope: values.scope }));
}

/** The profile from the flags; the create body's schema checks it, in either mode (and the runtime names an unregistered provider). */
function profileOf(values: EnvValues): Partial<Profile> {
  const number = (flag: (typeof profileFlags)[number]): number | undefined => {
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

function describeEnvironment(e: Environment): string {
  const a = e.allocation ? ` ${e.allocation.allocationId} gen ${e.allocation.generation} ${e.allocation.state}` : '';
  return `${e.id}  ${e.name}  ${e.profile.provider}  ${String(e.state)}  ${e.availability}${a}`;
}

function describeAllocation(x: Allocation): string {
  const resource = x.identity ? ` ${x.identity.resourceId.slice(0, 12)}` : '';
  return `${x.allocationId}  ${x.environmentId}  gen ${x.generation}  ${x.state}  ${x.provider}/${x.ownership}${resource}  uses ${x.uses.length}`;
}
