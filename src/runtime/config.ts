/**
 * The runtime's configuration (DESIGN §8 fixed shapes): flags first, then environment variables, then defaults,
 * validated with zod. Also the two identities kept in the data directory: the admin token (`token`, mode 0600,
 * generated when BERTH_TOKEN is unset) and the runtime id (`runtime-id`, so a restart keeps its runtimeId and
 * fences the next epoch).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../../schemas/errors.ts';
import { defaultRolePolicy, type RolePolicy } from './role-policy.ts';
import type { RetentionSettings } from './maintenance/retention.ts';
import { isInside } from '../store/artifact-archive.ts';
import { resolvePools, type PoolSettings } from './pools/pool-config.ts';

/** Values given on the command line; absent ones fall back to the environment. */
export interface ConfigFlags {
  dataDir?: string;
  host?: string;
  port?: string | number;
  store?: string;
}

/** `sqlite:PATH` names a store file of its own, which several runtimes (each with its data directory) may share. */
const storeSpec = z
  .string()
  .trim()
  .refine((s) => s === 'sqlite' || /^sqlite:./.test(s) || /^(esdb|eventstoredb)(\+discover)?:\/\/.+/.test(s), {
    message: 'must be "sqlite", "sqlite:/absolute/path" or an esdb:// / eventstoredb:// URL',
  })
  .refine((s) => !s.startsWith('sqlite:') || isAbsolute(s.slice('sqlite:'.length)), {
    message: 'the file of "sqlite:PATH" must be an absolute path',
  });

const settingsSchema = z.object({
  dataDir: z.string().trim().min(1, 'must not be empty'),
  host: z.string().trim().min(1, 'must not be empty'),
  port: z.coerce.number().int('must be an integer').min(0).max(65535),
  store: storeSpec,
  maintenanceMs: z.coerce.number().int('must be an integer').min(10, 'must be at least 10 ms'),
  token: z.string().min(16, 'must be at least 16 characters').optional(),
});

/** Where each setting comes from, for error messages. */
const sources: Record<keyof z.infer<typeof settingsSchema>, string> = {
  dataDir: '--data-dir / BERTH_DATA_DIR',
  host: '--host / BERTH_HOST',
  port: '--port / BERTH_PORT',
  store: '--store / BERTH_EVENTSTORE_URL',
  maintenanceMs: 'BERTH_MAINTENANCE_MS',
  token: 'BERTH_TOKEN',
};

export interface Settings {
  /** Absolute path of the data directory. */
  dataDir: string;
  host: string;
  port: number;
  /** 'sqlite' (`<dataDir>/events.sqlite3`), 'sqlite:/absolute/file' or an EventStoreDB URL. */
  store: string;
  maintenanceMs: number;
  /** BERTH_TOKEN, when set. */
  token?: string;
}

export interface BerthConfig extends Settings {
  /** The admin token (BERTH_TOKEN, or the one kept in `<dataDir>/token`). Never log it. */
  token: string;
  /** True when this start generated the token: the caller prints it, once. */
  tokenGenerated: boolean;
  runtimeId: string;
  /** Members' profile ceilings and scope quotas (role-policy.ts), from BERTH_MEMBER_* and BERTH_QUOTA_*. */
  policy: RolePolicy;
  /** Retention of finished executions' output (BERTH_RETENTION_*); undefined: off, everything is kept. */
  retention?: RetentionSettings;
  /** The admin's warm pools (BERTH_POOLS or BERTH_POOLS_FILE: pools/pool-config.ts); empty: none. */
  pools: PoolSettings[];
}

const retentionSchema = z.object({
  BERTH_RETENTION_DAYS: z.coerce.number().positive('must be a positive number of days').max(1_000_000).optional(),
  BERTH_RETENTION_ARCHIVE_DIR: z.string().trim().refine(isAbsolute, 'must be an absolute path').optional(),
});

/**
 * The retention policy from the environment (off unless BERTH_RETENTION_DAYS is set). The archive directory may not
 * lie inside the data directory, where members' managed workspaces and the server's own files live.
 */
export function resolveRetention(dataDir: string, env: NodeJS.ProcessEnv = process.env): RetentionSettings | undefined {
  const given = Object.fromEntries(Object.keys(retentionSchema.shape).flatMap((k) => (env[k] ? [[k, env[k]]] : [])));
  const parsed = retentionSchema.safeParse(given);
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`);
  const v = parsed.data;
  if (v?.BERTH_RETENTION_ARCHIVE_DIR !== undefined) {
    const archiveDir = resolve(v.BERTH_RETENTION_ARCHIVE_DIR);
    if (isInside(resolve(dataDir), archiveDir) || isInside(archiveDir, resolve(dataDir))) {
      problems.push('BERTH_RETENTION_ARCHIVE_DIR: must lie outside the data directory (and not contain it)');
    }
    if (v.BERTH_RETENTION_DAYS === undefined) problems.push('BERTH_RETENTION_ARCHIVE_DIR: needs BERTH_RETENTION_DAYS');
  }
  if (problems.length > 0) throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
  if (v?.BERTH_RETENTION_DAYS === undefined) return undefined;
  return {
    days: v.BERTH_RETENTION_DAYS,
    ...(v.BERTH_RETENTION_ARCHIVE_DIR !== undefined ? { archiveDir: resolve(v.BERTH_RETENTION_ARCHIVE_DIR) } : {}),
  };
}

/** Merges flags, environment and defaults; throws `invalid_request` naming every bad setting. No file is touched. */
export function resolveSettings(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): Settings {
  const blank = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);
  const parsed = settingsSchema.safeParse({
    dataDir: flags.dataDir ?? blank(env.BERTH_DATA_DIR) ?? './.berth',
    host: flags.host ?? blank(env.BERTH_HOST) ?? '127.0.0.1',
    port: flags.port ?? blank(env.BERTH_PORT) ?? 7420,
    store: flags.store ?? blank(env.BERTH_EVENTSTORE_URL) ?? 'sqlite',
    maintenanceMs: blank(env.BERTH_MAINTENANCE_MS) ?? 15_000,
    token: blank(env.BERTH_TOKEN),
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => {
      const key = i.path[0] as keyof typeof sources;
      return `${sources[key] ?? String(key)}: ${i.message}`;
    });
    throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
  }
  return { ...parsed.data, dataDir: resolve(parsed.data.dataDir) };
}

const positiveInt = z.coerce.number().int('must be an integer').positive('must be positive').max(Number.MAX_SAFE_INTEGER);

/** The role policy's knobs: each variable, its schema (the profile's own bounds for ceilings) and its default. */
const policySchema = z.object({
  BERTH_MEMBER_MAX_MEMORY_MB: z.coerce.number().int('must be an integer').min(16).max(1_048_576).default(defaultRolePolicy.ceilings.memoryMb),
  BERTH_MEMBER_MAX_CPUS: z.coerce.number().positive('must be positive').max(1024).default(defaultRolePolicy.ceilings.cpus),
  BERTH_MEMBER_MAX_PIDS: z.coerce.number().int('must be an integer').min(8).max(1_000_000).default(defaultRolePolicy.ceilings.pidsLimit),
  BERTH_MEMBER_MAX_HOME_MB: z.coerce.number().int('must be an integer').min(1).max(1_048_576).default(defaultRolePolicy.ceilings.homeMb),
  BERTH_MEMBER_MAX_WORKSPACE_MB: z.coerce.number().int('must be an integer').min(1).max(1_048_576).default(defaultRolePolicy.ceilings.workspaceMb),
  BERTH_MEMBER_NETWORK: z.enum(['bridge', 'none']).default(defaultRolePolicy.ceilings.network),
  BERTH_QUOTA_ENVIRONMENTS: positiveInt.default(defaultRolePolicy.quotas.environments),
  BERTH_QUOTA_CONCURRENT_EXECUTIONS: positiveInt.default(defaultRolePolicy.quotas.concurrentExecutions),
  BERTH_QUOTA_CONCURRENT_BUILDS: positiveInt.default(defaultRolePolicy.quotas.concurrentBuilds),
  BERTH_QUOTA_CONCURRENT_IMPORTS: positiveInt.default(defaultRolePolicy.quotas.concurrentImports),
  BERTH_QUOTA_OUTPUT_BYTES: positiveInt.default(defaultRolePolicy.quotas.outputBytes),
  BERTH_QUOTA_SCOPE_OUTPUT_BYTES: positiveInt.default(defaultRolePolicy.quotas.scopeOutputBytes),
  BERTH_QUOTA_WORKSPACES: positiveInt.default(defaultRolePolicy.quotas.workspaces),
  BERTH_QUOTA_LEASES: positiveInt.default(defaultRolePolicy.quotas.leases),
  BERTH_DISK_RESERVE_MB: z.coerce.number().int('must be an integer').min(0).max(1_048_576).optional(),
});

/** Members' ceilings and quotas from the environment; throws `invalid_request` naming every bad variable. */
export function resolveRolePolicy(env: NodeJS.ProcessEnv = process.env): RolePolicy {
  const given = Object.fromEntries(Object.keys(policySchema.shape).flatMap((k) => (env[k] ? [[k, env[k]]] : [])));
  const parsed = policySchema.safeParse(given);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`);
    throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
  }
  const v = parsed.data;
  return {
    ceilings: { memoryMb: v.BERTH_MEMBER_MAX_MEMORY_MB, cpus: v.BERTH_MEMBER_MAX_CPUS, pidsLimit: v.BERTH_MEMBER_MAX_PIDS, homeMb: v.BERTH_MEMBER_MAX_HOME_MB, workspaceMb: v.BERTH_MEMBER_MAX_WORKSPACE_MB, network: v.BERTH_MEMBER_NETWORK },
    quotas: {
      environments: v.BERTH_QUOTA_ENVIRONMENTS,
      concurrentExecutions: v.BERTH_QUOTA_CONCURRENT_EXECUTIONS,
      concurrentBuilds: v.BERTH_QUOTA_CONCURRENT_BUILDS,
      concurrentImports: v.BERTH_QUOTA_CONCURRENT_IMPORTS,
      outputBytes: v.BERTH_QUOTA_OUTPUT_BYTES,
      scopeOutputBytes: v.BERTH_QUOTA_SCOPE_OUTPUT_BYTES,
      workspaces: v.BERTH_QUOTA_WORKSPACES,
      leases: v.BERTH_QUOTA_LEASES,
    },
    ...(v.BERTH_DISK_RESERVE_MB !== undefined ? { diskReserveMb: v.BERTH_DISK_RESERVE_MB } : {}),
  };
}

const remoteHostsSchema = z
  .array(
    z
      .strictObject({
        name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be [a-z0-9-], as profiles name it'),
        url: z.url({ protocol: /^https$/, error: 'must be an https:// URL' }).optional(),
        socket: z.string().refine(isAbsolute, 'must be an absolute path').optional(),
        credentialFile: z.string().refine(isAbsolute, 'must be an absolute path').optional(),
        caFile: z.string().refine(isAbsolute, 'must be an absolute path').optional(),
        clientCert: z.string().refine(isAbsolute, 'must be an absolute path').optional(),
        clientKey: z.string().refine(isAbsolute, 'must be an absolute path').optional(),
      })
      .refine((h) => (h.url === undefined) !== (h.socket === undefined), 'needs exactly one of url and socket')
      .refine((h) => (h.clientCert === undefined) === (h.clientKey === undefined), 'clientCert and clientKey go together')
      .refine((h) => h.clientCert === undefined || h.url !== undefined, 'a client certificate needs a url (TLS)')
      .refine((h) => h.credentialFile !== undefined || h.clientCert !== undefined, 'needs credentialFile, clientCert/clientKey, or both'),
  )
  .refine((hosts) => new Set(hosts.map((h) => h.name)).size === hosts.length, 'host names must be distinct');

export interface RemoteHostSetting {
  name: string;
  url?: string;
  socketPath?: string;
  credentialFile?: string;
  caFile?: string;
  clientCertFile?: string;
  clientKeyFile?: string;
}

/**
 * The Execution Hosts the admin configured for the `remote` provider: BERTH_REMOTE_HOSTS names a JSON file
 * `[{"name", "url": "https://…" | "socket": "/path", "credentialFile"?, "caFile"?, "clientCert"?, "clientKey"?}]`
 * (a bearer credential, a client certificate over TLS, or both); none when unset.
 */
export function resolveRemoteHosts(env: NodeJS.ProcessEnv = process.env): RemoteHostSetting[] {
  const file = env.BERTH_REMOTE_HOSTS;
  if (!file) return [];
  let parsed: z.ZodSafeParseResult<z.infer<typeof remoteHostsSchema>>;
  try {
    parsed = remoteHostsSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (e) {
    throw new BerthError('invalid_request', `invalid configuration: BERTH_REMOTE_HOSTS: cannot read ${file}: ${(e as Error).message}`, { file });
  }
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `BERTH_REMOTE_HOSTS ${i.path.join('.')}: ${i.message}`);
    throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
  }
  return parsed.data.map(({ socket, clientCert, clientKey, ...h }) => ({
    ...h,
    ...(socket !== undefined ? { socketPath: socket } : {}),
    ...(clientCert !== undefined ? { clientCertFile: clientCert, clientKeyFile: clientKey } : {}),
  }));
}

/** Resolves the settings and creates the data directory with its token and runtime id when missing. */
export function loadConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): BerthConfig {
  const settings = resolveSettings(flags, env);
  const policy = resolveRolePolicy(env);
  const retention = resolveRetention(settings.dataDir, env);
  const pools = resolvePools(env);
  try {
    mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new BerthError('invalid_request', `cannot create the data directory ${settings.dataDir}: ${(e as Error).message}`, {
      dataDir: settings.dataDir,
    });
  }
  const runtimeId = keptValue(join(settings.dataDir, 'runtime-id'), () => `rt_${randomUUID().replaceAll('-', '')}`);
  const kept = { runtimeId, policy, pools, ...(retention ? { retention } : {}) };
  if (settings.token) return { ...settings, token: settings.token, tokenGenerated: false, ...kept };
  let generated = false;
  const token = keptValue(join(settings.dataDir, 'token'), () => {
    generated = true;
    return `bt_${randomBytes(24).toString('base64url')}`;
  });
  return { ...settings, token, tokenGenerated: generated, ...kept };
}

/**
 * The trimmed content of `file`, or a fresh value put there whole (mode 0600). The value is written to a file of this
 * process first and linked into place, which fails if `file` exists: a racing starter never reads it half written.
 * (Created empty and then written, a second starter read it empty in between and wrote its own over it, so the
 * first served with a runtime id or token the file no longer held.)
 */
function keptValue(file: string, fresh: () => string): string {
  const kept = readKept(file);
  if (kept) return kept;
  const value = fresh();
  const mine = `${file}.${process.pid}.new`;
  writeFileSync(mine, `${value}\n`, { mode: 0o600 });
  chmodSync(mine, 0o600); // whatever the umask
  try {
    if (kept === '') {
      renameSync(mine, file); // an empty file (an older Berth killed while writing it) is replaced
      return value;
    }
    linkSync(mine, file);
    return value;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return readKept(file) || value; // another starter's, complete
  } finally {
    rmSync(mine, { force: true });
  }
}

/** The trimmed content of `file`; undefined when there is none. */
function readKept(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    return undefined;
  }
}
