/**
 * `berth lease ls|get|bind|acquire|pause|hold|resume|release`: the leases of the token's scope on a running server —
 * work bound to a machine by the caller's key, acquired lazily, paused, held, resumed and released.
 */
import type { Berth, Lease } from '../client/berth-client.ts';
import { UsageError } from './command-args.ts';
import { table } from './text-table.ts';
import { subcommands, type Print } from './subcommands.ts';
import { writeLine } from './stdout-lines.ts';
import { leaseUsage } from './usage.ts';


const options = {
  'work-kind': { type: 'string' },
  'work-id': { type: 'string' },
  work: { type: 'string' },
  'profile-json': { type: 'string' },
  environment: { type: 'string' },
  workspace: { type: 'string' },
  idle: { type: 'string' },
  suspend: { type: 'boolean' },
  cause: { type: 'string' },
  'retry-at': { type: 'string' },
  'retry-in': { type: 'string' },
} as const;

const pauseText = (l: Lease) =>
  l.pause ? `${l.pause.state} (${l.pause.cause.kind}, attempt ${l.pause.attempt}${l.pause.retryAt !== null ? `, retry at ${new Date(l.pause.retryAt).toISOString()}` : ''})` : '-';

const describe = (l: Lease) =>
  `${l.key}  ${l.work.kind}:${l.work.id}  ${l.state}  ${l.machine ? `machine ${l.machine.allocationId} (generation ${l.machine.generation})` : 'no machine'}  pause ${pauseText(l)}`;

function work(value: string | undefined): { kind: string; id: string } {
  const colon = value?.indexOf(':') ?? -1;
  if (!value || colon <= 0) throw new UsageError('--work takes KIND:ID', leaseUsage);
  return { kind: value.slice(0, colon), id: value.slice(colon + 1) };
}

function seconds(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${flag} takes whole seconds`, leaseUsage);
  return n;
}

function retryAt(at: string | undefined, within: string | undefined): number | undefined {
  if (at !== undefined && within !== undefined) throw new UsageError('give --retry-at or --retry-in, not both', leaseUsage);
  if (at !== undefined) {
    const ms = Date.parse(at);
    if (Number.isNaN(ms)) throw new UsageError('--retry-at takes an ISO time', leaseUsage);
    return ms;
  }
  const s = seconds(within, 'retry-in');
  return s === undefined ? undefined : Date.now() + s * 1000;
}

function profile(json: string | undefined): Record<string, unknown> | undefined {
  if (json === undefined) return undefined;
  try {
    return JSON.parse(json) as Record<string, unknown>;
  } catch {
    throw new UsageError('--profile-json takes a JSON object', leaseUsage);
  }
}

/** hold, resume, release: the lease after it. */
const stateChange = (verb: 'hold' | 'resume' | 'release') => ({
  args: ['KEY'],
  run: async (berth: Berth, [key]: string[], _: unknown, print: Print) => {
    const lease = await berth.leases[verb](key!);
    await print(lease, describe(lease));
  },
});

export const leaseCommand = subcommands(leaseUsage, options, {
  ls: {
    args: [],
    flags: ['work-kind', 'work-id'],
    run: async (berth, _, values) => {
      const all = await berth.leases.list({ workKind: values['work-kind'], workId: values['work-id'] });
      if (values.json) for (const l of all) await writeLine(JSON.stringify(l));
      else await table(['KEY', 'WORK', 'STATE', 'MACHINE', 'PAUSE'], all.map((l) => [l.key, `${l.work.kind}:${l.work.id}`, l.state, l.machine ? `${l.machine.allocationId}@${l.machine.generation}` : '-', pauseText(l)]));
    },
  },
  get: {
    args: ['KEY'],
    run: async (berth, [key], _, print) => {
      const lease = await berth.leases.get(key!);
      await print(lease, describe(lease));
    },
  },
  bind: {
    args: ['KEY'],
    flags: ['work', 'profile-json', 'environment', 'workspace', 'idle'],
    run: async (berth, [key], values, print) => {
      const lease = await berth.leases.bind({
        key: key!,
        work: work(values.work),
        profile: profile(values['profile-json']) as never,
        environmentId: values.environment,
        workspaceId: values.workspace,
        idleSeconds: seconds(values.idle, 'idle'),
      });
      await print(lease, describe(lease));
    },
  },
  acquire: {
    args: ['KEY'],
    flags: ['suspend'],
    run: async (berth, [key], values, print) => {
      const got = await berth.leases.acquire(key!, values.suspend ? { suspend: true } : {});
      const t = got.target;
      await print(got, `${t.environmentId}  ${t.allocationId}  generation ${t.generation}  ${got.reused ? 'reused' : 'new machine'}`);
    },
  },
  pause: {
    args: ['KEY'],
    flags: ['cause', 'retry-at', 'retry-in'],
    run: async (berth, [key], values, print) => {
      if (!values.cause) throw new UsageError('pause takes --cause KIND', leaseUsage);
      const at = retryAt(values['retry-at'], values['retry-in']);
      const lease = await berth.leases.pause(key!, { cause: { kind: values.cause }, ...(at !== undefined ? { retryAt: at } : {}) });
      await print(lease, describe(lease));
    },
  },
  hold: stateChange('hold'),
  resume: stateChange('resume'),
  release: stateChange('release'),
});
