/**
 * The `berth` command: dispatches to one subcommand and turns its failure into a one-line message and an exit code
 * (1 for an error, 2 for a bad command line). bin/berth.js loads this file (built, or the sources through tsx).
 */
import { isBerthError } from '../../schemas/errors.ts';
import { UsageError } from './command-args.ts';
import { helpCommand } from './help.ts';
import { closeInheritedDescriptors } from './inherited-descriptors.ts';
import { isStdoutClosed } from './stdout-lines.ts';

type Command = (argv: string[]) => Promise<number>;

/** A command whose module is loaded only when it runs: `berth help` and `--version` load none of them. */
const lazy =
  <M>(load: () => Promise<M>, pick: (module: M) => Command): Command =>
  async (argv) =>
    pick(await load())(argv);

const exec = lazy(() => import('./exec.ts'), (m) => m.execCommand);

const commands: Record<string, Command> = {
  serve: lazy(() => import('./serve.ts'), (m) => m.serveCommand),
  host: lazy(() => import('./host.ts'), (m) => m.hostCommand),
  events: lazy(() => import('./events.ts'), (m) => m.eventsCommand),
  env: lazy(() => import('./env.ts'), (m) => m.envCommand),
  replay: lazy(() => import('./replay.ts'), (m) => m.replayCommand),
  'check-history': lazy(() => import('./check-history.ts'), (m) => m.checkHistoryCommand),
  projections: lazy(() => import('./projections.ts'), (m) => m.projectionsCommand),
  runtime: lazy(() => import('./runtime.ts'), (m) => m.runtimeCommand),
  exec,
  logs: lazy(() => import('./logs.ts'), (m) => m.logsCommand),
  ps: lazy(() => import('./ps.ts'), (m) => m.psCommand),
  workspace: lazy(() => import('./workspace.ts'), (m) => m.workspaceCommand),
  lease: lazy(() => import('./lease.ts'), (m) => m.leaseCommand),
  session: lazy(() => import('./session.ts'), (m) => m.sessionCommand),
  turn: lazy(() => import('./turn.ts'), (m) => m.turnCommand),
  cp: lazy(() => import('./cp.ts'), (m) => m.cpCommand),
  run: exec,
  help: helpCommand,
  '--help': helpCommand,
  '-h': helpCommand,
  // `--version` is bin/berth.js's: answered there, it loads no module at all.
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
    // The client's error module (and the wire schemas it parses with) is loaded only on this path.
    const known = isBerthError(e) || (await import('../client/berth-api-error.ts')).isBerthApiError(e);
    process.stderr.write(`berth: ${known ? (e as Error).message : ((e as Error)?.stack ?? String(e))}\n`);
    return 1;
  }
}

// Before any command starts anything: nothing Berth runs may inherit what its parent leaked.
closeInheritedDescriptors();
process.exitCode = await main(process.argv.slice(2));
