/**
 * `berth host`: runs an Execution Host (src/host/) on this machine, serving its native provider (and with --docker
 * its Docker engine) to one control plane over a Unix socket and/or HTTPS, until SIGINT/SIGTERM. Commands it runs
 * survive its stop; the next start on the same data directory serves their receipts and output again.
 */
import { resolve } from 'node:path';
import { startHost } from '../host/host-server.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';

export const hostUsage = `usage: berth host [--socket PATH] [--listen HOST:PORT --tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
                  --credential FILE [--data-dir DIR] [--docker]
  Serves this machine's commands to a Berth control plane (its "remote" provider). --socket listens on a Unix
  socket (mode 0600); --listen on TCP, which needs --tls-cert/--tls-key unless HOST is loopback. Callers present the
  secret in --credential FILE (mode 0600, at least 16 characters) as a bearer token. DIR (default ./.berth-host)
  keeps the host's incarnation, allocations, workspace views and command spools. --docker also runs profiles with
  "backend": "docker" in containers on this machine's Docker engine (DOCKER_HOST, as the docker CLI reads it).
  --tls-client-ca FILE: TLS callers must present a client certificate that CA signed (mTLS); with it and no
  --socket, --credential may be left out (the certificate alone admits).`;

function hostPort(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value);
  const port = Number(match?.[3]);
  if (!match || port > 65535) throw new UsageError(`--listen must be HOST:PORT, not ${value}`, hostUsage);
  return { host: match[1] ?? match[2]!, port };
}

export async function hostCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      socket: { type: 'string' },
      listen: { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-client-ca': { type: 'string' },
      credential: { type: 'string' },
      'data-dir': { type: 'string' },
      docker: { type: 'boolean' },
    },
    hostUsage,
  );
  if (values.help) return void console.log(hostUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, hostUsage);
  if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) throw new UsageError('--tls-cert and --tls-key go together', hostUsage);
  if (values['tls-client-ca'] && !values['tls-cert']) throw new UsageError('--tls-client-ca needs --listen with --tls-cert and --tls-key', hostUsage);
  if (!values.credential && !values['tls-client-ca']) throw new UsageError('--credential FILE is required (or --tls-client-ca FILE on a TLS listener)', hostUsage);
  const host = await startHost({
    dataDir: resolve(values['data-dir'] ?? '.berth-host'),
    ...(values.credential ? { credentialFile: resolve(values.credential) } : {}),
    ...(values.socket ? { socketPath: resolve(values.socket) } : {}),
    ...(values.listen ? { listen: hostPort(values.listen) } : {}),
    ...(values.docker ? { docker: true } : {}),
    ...(values['tls-cert'] ? { tls: { certPath: values['tls-cert'], keyPath: values['tls-key']!, ...(values['tls-client-ca'] ? { clientCaPath: values['tls-client-ca'] } : {}) } } : {}),
    log: (message) => console.error(message),
  });
  const stop = new Promise<void>((done) => process.once('SIGINT', () => done()).once('SIGTERM', () => done()));
  for (const url of host.urls) console.log(`Berth host listening on ${url} (incarnation ${host.incarnation})`);
  await stop;
  await host.close();
  return 0;
}
