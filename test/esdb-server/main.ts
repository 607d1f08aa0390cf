/**
 * The test server as a process of its own (`node --import tsx test/esdb-server/main.ts [--port N]`), for tests whose
 * Berth process is killed and restarted while the store lives on. Prints `esdb test server listening on <port>`.
 */
import { parseArgs } from 'node:util';
import { startEsdbServer } from './esdb-server.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });
const server = await startEsdbServer({ port: Number(values.port) });
console.log(`esdb test server listening on ${server.port}`);
const stop = () => void server.close().then(() => process.exit(0));
process.on('SIGTERM', stop).on('SIGINT', stop);
