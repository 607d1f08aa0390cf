/**
 * `berth serve`: starts one Berth (providers, store, epoch, projections, recovery, maintenance) and only then
 * listens, printing `Berth listening on http://HOST:PORT` once it admits work. SIGINT/SIGTERM stop it cleanly (a
 * second one forces). The HTTP side is a minimal health server until the gateway's app replaces it.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { loadConfig, type BerthConfig } from '../runtime/config.ts';
import { startBerth, type Berth } from '../runtime/berth.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { createLogger } from './logger.ts';

export const serveUsage = `usage: berth serve [--data-dir DIR] [--host HOST] [--port PORT] [--store sqlite|esdb://…]
  Starts Berth. Environment: BERTH_DATA_DIR, BERTH_HOST, BERTH_PORT, BERTH_EVENTSTORE_URL, BERTH_TOKEN,
  BERTH_MAINTENANCE_MS, BERTH_LOG_LEVEL.`;

export async function serveCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...storeOptions, host: { type: 'string' }, port: { type: 'string', short: 'p' } },
    serveUsage,
  );
  if (values.help) return void console.log(serveUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, serveUsage);
  const config = loadConfig({ dataDir: values['data-dir'], host: values.host, port: values.port, store: values.store });
  const log = createLogger();
  if (config.tokenGenerated) {
    // The only time the token is shown: it is kept in the data directory, readable by its owner only.
    console.log(`Admin token (shown once, kept in ${config.dataDir}/token): ${config.token}`);
  }

  const stopRequested = new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', resolve).once('SIGTERM', resolve);
  });
  const berth = await startBerth({ settings: config, runtimeId: config.runtimeId, logger: log });
  let app: FastifyInstance | undefined;
  try {
    app = healthServer(berth);
    await app.listen({ host: config.host, port: config.port });
    console.log(`Berth listening on ${listeningUrl(app, config)}`);
  } catch (e) {
    await app?.close();
    await berth.stop();
    throw e;
  }

  const signal = await stopRequested;
  log.info({ signal }, 'stopping');
  const force = () => {
    log.warn('second signal: exiting without a clean stop');
    process.exit(1);
  };
  process.once('SIGINT', force).once('SIGTERM', force);
  await app.close();
  await berth.stop();
  return 0;
}

function healthServer({ runtime }: Berth): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/healthz', async () => ({
    status: 'ok',
    runtimeId: runtime.identity.runtimeId,
    epoch: runtime.identity.epoch,
    store: runtime.store.kind,
  }));
  return app;
}

function listeningUrl(app: FastifyInstance, config: BerthConfig): string {
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return `http://${host}:${port}`;
}

