/**
 * `berth serve`: starts one Berth (providers, store, epoch, projections, recovery, maintenance) and only then opens
 * the gateway (DESIGN §8) on its listeners — TCP (127.0.0.1:7420 by default), a Unix socket, HTTPS — printing
 * `Berth listening on URL` for each once it admits work, then records its URL in the data directory (for the CLI
 * beside it) and prints the export lines another shell needs. The admin token acts in scope `default`; a tokens file adds
 * tenants. SIGINT/SIGTERM stop it cleanly (a second one forces); running commands survive it and are reconciled by
 * the next start.
 */
import net from 'node:net';
import { join } from 'node:path';
import { buildGateway, type Gateway } from '../gateway/app.ts';
import { createTokenAuth, loadTokensFile, type TokenEntry } from '../gateway/auth.ts';
import { gatewayLimitsFromEnv } from '../gateway/limits.ts';
import { listen, type ListenAddress, type Listener, type TlsFiles } from '../gateway/listen.ts';
import { BerthError } from '../../schemas/errors.ts';
import { loadConfig, resolveSettings } from '../runtime/config.ts';
import { startBerth } from '../runtime/berth.ts';
import { recordServing } from '../runtime/core/serving-record.ts';
import { unjournaledExt4 } from '../runtime/core/unjournaled-disk.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { createLogger } from './logger.ts';
import { serveUsage } from './usage.ts';
import { isLoopbackHost } from '../providers/loopback-host.ts';

/** The scope the admin token acts in: the one the in-process CLI commands (`berth env`, `berth run`) use. */
export const ADMIN_SCOPE = 'default';


/** Throws when `host:port` cannot be bound (the probe binds it and lets go at once; port 0 is always free). */
async function refuseBusyPort(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  const failure = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    probe.once('error', resolve).listen({ host, port, exclusive: true }, () => resolve(undefined));
  });
  if (!failure) return void (await new Promise((resolve) => probe.close(resolve)));
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (failure.code === 'EADDRINUSE') throw new BerthError('unavailable', `port ${where} is in use`, { host, port });
  throw new BerthError('unavailable', `cannot listen on ${where}: ${failure.message}`, { host, port, cause: failure.code });
}

export async function serveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      ...storeOptions,
      host: { type: 'string' },
      port: { type: 'string', short: 'p' },
      socket: { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      tokens: { type: 'string' },
    },
    serveUsage,
  );
  if (values.help) return void console.log(serveUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, serveUsage);
  if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) {
    throw new UsageError('--tls-cert and --tls-key go together', serveUsage);
  }
  const flags = { dataDir: values['data-dir'], host: values.host, port: values.port, store: values.store };
  const settings = resolveSettings(flags);
  const gatewayLimits = gatewayLimitsFromEnv(process.env);
  const tls: TlsFiles | undefined = values['tls-cert'] ? { certPath: values['tls-cert'], keyPath: values['tls-key']! } : undefined;
  const tcpAsked = [values.host, values.port, process.env.BERTH_HOST, process.env.BERTH_PORT].some((v) => v !== undefined && v !== '');
  const addresses: ListenAddress[] = [];
  if (values.socket) addresses.push({ socketPath: values.socket });
  if (!values.socket || tcpAsked) {
    if (!tls && !isLoopbackHost(settings.host)) {
      throw new UsageError(`listening on ${settings.host} needs TLS (--tls-cert/--tls-key): tokens must not cross a network in clear`, serveUsage);
    }
    addresses.push({ host: settings.host, port: settings.port });
  }
  // Before anything is written or shown (token, runtime id, a fenced epoch): a busy port would make them for nothing.
  for (const address of addresses) if ('port' in address) await refuseBusyPort(address.host!, address.port!);
  const config = loadConfig(flags);
  const tokensFile = values.tokens ?? (process.env.BERTH_TOKENS_FILE || undefined);
  const tokens: TokenEntry[] = tokensFile ? await loadTokensFile(tokensFile) : [];
  const auth = createTokenAuth({ adminToken: config.token, adminScope: ADMIN_SCOPE, tokens });

  const log = createLogger();
  if (config.tokenGenerated) {
    // The only time the token is shown: it is kept in the data directory, readable by its owner only.
    console.log(`Admin token (shown once, kept in ${config.dataDir}/token): ${config.token}`);
  }

  const stopRequested = new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', resolve).once('SIGTERM', resolve);
  });
  const berth = await startBerth({
    settings: config,
    runtimeId: config.runtimeId,
    logger: log,
    policy: config.policy,
    // The tokens and the gateway's TLS key are the server's secrets: no contained command (as its uid) may read them.
    hiddenFromSandbox: [...(tokensFile ? [tokensFile] : []), ...(tls ? [tls.keyPath] : [])],
    ...(config.retention ? { retention: config.retention } : {}),
    warmPools: config.pools,
  });
  const device = unjournaledExt4(config.dataDir);
  if (device) {
    log.warn(
      { dataDir: config.dataDir, device },
      'the data directory is on ext4 without a journal: every file it creates skips the inodes freed in its block group in the last 60 to 300 s, so each command (nine spool files) costs more the faster commands come; spool directories are spread over the block groups, which helps only where there are many; a journaled filesystem has no such cost',
    );
  }
  const { identity, store } = berth.runtime;
  const gateway: Gateway = buildGateway({
    api: berth.api,
    auth,
    logger: log,
    limits: gatewayLimits,
    health: () => ({ runtimeId: identity.runtimeId, epoch: identity.epoch, store: store.kind, failedProjections: berth.runtime.projections.failed.map((f) => f.name) }),
  });
  const listeners: Listener[] = [];
  const close = async () => {
    const gatewayClosed = gateway.close();
    await Promise.all(listeners.map((l) => l.close()));
    await gatewayClosed;
    await berth.stop();
  };
  try {
    for (const address of addresses) listeners.push(await listen(gateway, address, tls));
  } catch (e) {
    await close();
    throw e;
  }
  for (const listener of listeners) console.log(`Berth listening on ${listener.url}`);
  // The CLI beside it finds it through the data directory; another shell needs these lines.
  const http = listeners.find((l) => /^https?:\/\//.test(l.url));
  const tokenFile = settings.token === undefined ? join(config.dataDir, 'token') : undefined;
  const forget = http ? await recordServing(config.dataDir, { url: http.url, ...(tokenFile ? { tokenFile } : {}) }) : async () => undefined;
  // Runtimes sharing the store send the requests this one owns here (their owned_elsewhere answers name the URL).
  if (http) await berth.runtime.announce(http.url).catch((err: unknown) => log.warn({ err }, 'the URL could not be announced in the runtime stream'));
  if (http) {
    console.log(`For another shell:\n  export BERTH_URL=${http.url}`);
    console.log(tokenFile ? `  export BERTH_TOKEN="$(cat ${tokenFile})"` : '  export BERTH_TOKEN=…  # the BERTH_TOKEN this server was started with');
  }

  const signal = await stopRequested;
  log.info({ signal }, 'stopping');
  const force = () => {
    log.warn('second signal: exiting without a clean stop');
    process.exit(1);
  };
  process.once('SIGINT', force).once('SIGTERM', force);
  await forget();
  await close();
  return 0;
}
