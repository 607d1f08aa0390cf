/** `berth help`: the list of commands. */
import { eventsUsage } from './events.ts';
import { replayUsage } from './replay.ts';
import { serveUsage } from './serve.ts';

export const overview = `berth: control plane for agent execution environments

commands:
  serve    start the runtime and its HTTP API
  events   print the event log (--follow to keep tailing)
  replay   print a stream's events with the machine state before -> after each
  help     this text

${serveUsage}

${eventsUsage}

${replayUsage}`;

export async function helpCommand(): Promise<number> {
  console.log(overview);
  return 0;
}
