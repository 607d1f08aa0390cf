/**
 * The `berth` command: dispatches to one subcommand and turns its failure into a one-line message and an exit code
 * (1 for an error, 2 for a bad command line). bin/berth.js loads this file through tsx.
 */
import { isBerthError } from '../../schemas/errors.ts';
import { isBerthApiError } from '../client/berth-api-error.ts';
import { UsageError } from './command-args.ts';
import { cpCommand } from './cp.ts';
import { envCommand } from './env.ts';
import { eventsCommand } from './events.ts';
import { execCommand } from './exec.ts';
import { helpCommand, versionCommand } from './help.ts';
import { logsCommand } from './logs.ts';
import { psCommand } from './ps.ts';
import { replayCommand } from './replay.ts';
import { serveCommand } from './serve.ts';
import { sessionCommand } from './session.ts';
import { isStdoutClosed } from './stdout-lines.ts';
import { turnCommand } from './turn.ts';
import { leaseCommand } from './lease.ts';
import { workspaceCommand } from './workspace.ts';

const commands: Record<string, (argv: string[]) => Promise<number>> = {
  serve: serveCommand,
  host: (argv) => import('./host.ts').then((m) => m.hostCommand(argv)),
  events: eventsCommand,
  env: envCommand,
  replay: replayCommand,
  'check-history': (argv) => import('./check-history.ts').then((m) => m.checkHistoryCommand(argv)),
  projections: (argv) => import('./projections.ts').then((m) => m.projectionsCommand(argv)),
  exec: execCommand,
  logs: logsCommand,
  ps: psCommand,
  workspace: workspaceCommand,
  lease: leaseCommand,
  session: sessionCommand,
  turn: turnCommand,
  cp: cpCommand,
  run: execCommand,
  help: helpCommand,
  '--help': helpCommand,
  '-h': helpCommand,
  '--version': versionCommand,
};

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const command = name === undefined ? helpCommand : commands[name];
  if (!command) {
    process.stderr.write(`berth: unknown command "${name}" (see berth --help)\n`);
    return 2;
  }
  try {
    return await command(rest);
  } catch (e) {
    // The reader of stdout went away (`berth events | head -1`): nothing is left to say to it.
    if (isStdoutClosed(e)) return 0;
    if (e instanceof UsageError) {
      process.stderr.write(`berth: ${e.message}\n${e.usage}\n`);
      return 2;
    }
    // Errors of ours (local or answered by a server) are one sentence; anything else is a bug: show the stack.
    const known = isBerthError(e) || isBerthApiError(e);
    process.stderr.write(`berth: ${known ? (e as Error).message : ((e as Error)?.stack ?? String(e))}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
