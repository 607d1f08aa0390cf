/**
 * `berth env …` through the runtime API in this process, against the data directory: starts the runtime (a new
 * epoch: recovery reconciles first) as an admin of one scope, and stops it at close. Not while `berth serve` uses the
 * same data directory (its lock refuses a second runtime). Input and answers pass through the gateway's schemas, so
 * both paths take and print the same shapes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { allocationSchema, createEnvironmentBody, environmentSchema, PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import { BerthError } from '../../schemas/errors.ts';
import { parseOrReject } from '../../schemas/parse-input.ts';
import { startBerth } from '../runtime/berth.ts';
import { loadConfig } from '../runtime/config.ts';
import type { Caller } from '../runtime/runtime-api.ts';
import type { EnvironmentCommands } from './environment-commands.ts';
import { createLogger } from './logger.ts';

const buildPollMs = 250;

export async function openInProcess(options: { dataDir?: string; store?: string; scope?: string }): Promise<EnvironmentCommands> {
  const config = loadConfig({ dataDir: options.dataDir, store: options.store });
  const caller: Caller = { scope: options.scope ?? 'default', role: 'admin' };
  const berth = await startBerth({ settings: config, runtimeId: config.runtimeId, logger: createLogger({ level: process.env.BERTH_LOG_LEVEL ?? 'warn' }) });
  const { api } = berth;
  const content = () => {
    if (!api.content) throw new BerthError('not_found', contentOff);
    return api.content;
  };
  // A build runs inside this runtime: stopping it at once would interrupt every build this command started.
  const started: { id: string; version: number }[] = [];
  return {
    contentUnavailable: api.content ? undefined : contentOff,
    // The body a server would check, with its sentence for a mistake (and its defaults filled in).
    create: async (input) => environmentSchema.parse(await api.createEnvironment(caller, parseOrReject(createEnvironmentBody, input, 'body'))),
    page: async (cursor) => {
      const { items, next } = await api.listEnvironments(caller, { cursor, limit: PAGE_LIMIT_MAX });
      return { items: items.map((e) => environmentSchema.parse(e)), ...(next !== undefined ? { next } : {}) };
    },
    resolve: (ref) => api.resolveEnvironment(caller, ref),
    get: async (id) => environmentSchema.parse(await api.getEnvironment(caller, id)),
    remove: (id) => api.deleteEnvironment(caller, id),
    acquire: async (id) => allocationSchema.parse(await api.acquire(caller, id)),
    release: async (id, allocationId) => allocationSchema.parse(await api.release(caller, id, allocationId)),
    importArchive: (id, tar, replace) => content().importArchive(caller, id, tar, { replace }),
    async startBuild(id) {
      const record = await content().startBuild(caller, id);
      started.push({ id, version: record.version });
      return record;
    },
    getBuild: (id, version) => content().getBuild(caller, id, version),
    versions: (id) => content().versions(caller, id),
    activate: (id, version) => content().activate(caller, id, version),
    async close() {
      try {
        for (const { id, version } of started) {
          while ((await content().getBuild(caller, id, version)).status === 'building') await sleep(buildPollMs);
        }
      } finally {
        await berth.stop();
      }
    },
  };
}

const contentOff = 'Environment content is switched off in this runtime (BERTH_ENVIRONMENTS_CONTENT=0).';
