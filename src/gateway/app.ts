/**
 * The gateway (DESIGN §8): a fastify application over `RuntimeApi`, one plugin per resource under routes/, one error
 * handler, bearer auth, and WebSocket upgrades routed through fastify. Transport-free: `listen()` (listen.ts) binds
 * it to TCP, a Unix socket and/or TLS.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { BerthError } from '../../schemas/errors.ts';
import type { RuntimeApi } from '../runtime/runtime-api.ts';
import { installAuth, type Authenticator } from './auth.ts';
import { installErrorHandling, sendError, toBerthError } from './errors.ts';
import { gatewayLogger, installRequestLog } from './gateway-logger.ts';
import { defaultLimits, type GatewayLimits } from './limits.ts';
import { OpenStreams } from './open-streams.ts';
import { installRequestRate } from './request-rate.ts';
import { StreamSlots } from './stream-slots.ts';
import type { GatewayDeps, ResourcePlugin, RouteDef } from './route.ts';
import { activityPlugin } from './routes/activity.ts';
import { allocationsPlugin } from './routes/allocations.ts';
import { capabilitiesPlugin } from './routes/capabilities.ts';
import { catalogPlugin } from './routes/catalog.ts';
import { checkpointsPlugin } from './routes/checkpoints.ts';
import { environmentBuildsPlugin } from './routes/environment-builds.ts';
import { environmentFilesPlugin } from './routes/environment-files.ts';
import { environmentsPlugin } from './routes/environments.ts';
import { eventsPlugin } from './routes/events.ts';
import { executionStreamsPlugin } from './routes/execution-streams.ts';
import { executionsPlugin } from './routes/executions.ts';
import { harnessesPlugin } from './routes/harnesses.ts';
import { healthPlugin } from './routes/health.ts';
import { leasesPlugin } from './routes/leases.ts';
import { machinesPlugin } from './routes/machines.ts';
import { openApiPlugin } from './routes/openapi.ts';
import { projectionsPlugin } from './routes/projections.ts';
import { runtimesPlugin } from './routes/runtimes.ts';
import { retentionPlugin } from './routes/retention.ts';
import { poolsPlugin } from './routes/pools.ts';
import { sessionsPlugin } from './routes/sessions.ts';
import { streamsPlugin } from './routes/streams.ts';
import { turnsPlugin } from './routes/turns.ts';
import { uiPlugin } from './routes/ui.ts';
import { workspacesPlugin } from './routes/workspaces.ts';
import { installStorageGuard } from './storage-guard.ts';
import { installUnreadBodyDiscard } from './unread-body.ts';
import { stringifyWire } from './wire-json.ts';
import { refuseStrayUpgrades, upgradeListener } from './ws-upgrade.ts';
import { packageVersion } from '../package-version.ts';

export interface GatewayOptions {
  api: RuntimeApi;
  auth: Authenticator;
  /** The parent logger; the gateway logs through a redacting child. Default: silent. */
  logger?: Logger;
  limits?: Partial<GatewayLimits>;
  /** Extra fields of the open `/healthz` answer (e.g. the runtime's identity); never a secret. */
  health?: () => Record<string, unknown>;
}

export interface Gateway {
  app: FastifyInstance;
  /** Every declared route (what /v1/openapi.json lists). */
  routes: RouteDef[];
  /** The `upgrade` listener for the node servers that serve this gateway. */
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Ends open SSE and WebSocket streams (1001), then closes the application. */
  close(): Promise<void>;
}

export function buildGateway(options: GatewayOptions): Gateway {
  const limits: GatewayLimits = { ...defaultLimits, ...options.limits };
  const log = gatewayLogger(options.logger, (value) => options.auth.authenticate(value) !== undefined);
  const app = Fastify({
    loggerInstance: log.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: limits.bodyBytes,
    routerOptions: { maxParamLength: 1024 },
    // The surface is exactly the declared routes (no implicit HEAD), and shutdown answers in the error shape.
    exposeHeadRoutes: false,
    return503OnClosing: false,
    frameworkErrors: (error, _request, reply) => sendError(reply, toBerthError(error)),
  });
  app.setReplySerializer((payload) => stringifyWire(payload));
  installErrorHandling(app, limits.bodyBytes);
  installUnreadBodyDiscard(app, limits);
  let closing = false;
  app.addHook('onRequest', async () => {
    if (closing) throw new BerthError('unavailable', 'The gateway is shutting down; retry on another instance or later.');
  });
  refuseStrayUpgrades(app);
  installAuth(app, options.auth);
  installRequestRate(app, limits);
  installStorageGuard(app, options.api);
  installRequestLog(app, log.redactUrl);

  const streams = new OpenStreams();
  const slots = new StreamSlots(limits.streamsPerToken);
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.wsMaxFrameBytes, perMessageDeflate: false });
  const deps: GatewayDeps = { api: options.api, limits, streams, slots, wss, health: options.health ?? (() => ({})) };
  const plugins: ResourcePlugin[] = [
    healthPlugin,
    capabilitiesPlugin,
    environmentsPlugin,
    environmentFilesPlugin,
    environmentBuildsPlugin,
    harnessesPlugin,
    allocationsPlugin,
    sessionsPlugin,
    workspacesPlugin,
    turnsPlugin,
    checkpointsPlugin,
    leasesPlugin,
    executionsPlugin,
    executionStreamsPlugin,
    activityPlugin,
    catalogPlugin,
    streamsPlugin,
    machinesPlugin,
    eventsPlugin,
    retentionPlugin,
    poolsPlugin,
    projectionsPlugin,
    runtimesPlugin,
    uiPlugin,
  ];
  plugins.push(openApiPlugin(() => routes, { title: 'Berth', version: packageVersion }));
  const routes = plugins.flatMap((plugin) => plugin.routes);
  for (const plugin of plugins) app.register(plugin, { deps });

  let closed: Promise<void> | undefined;
  return {
    app,
    routes,
    upgrade: upgradeListener(app),
    close() {
      closing = true;
      closed ??= (async () => {
        streams.closeAll();
        wss.close();
        await app.close();
      })();
      return closed;
    },
  };
}
