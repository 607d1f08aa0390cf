/** `berth help`: the list of commands; `berth --version`: the package's version. */
import { packageVersion } from '../package-version.ts';
import { eventsUsage } from './events.ts';
import { cpUsage } from './cp.ts';
import { execUsage } from './exec.ts';
import { leaseUsage } from './lease.ts';
import { logsUsage } from './logs.ts';
import { psUsage } from './ps.ts';
import { remoteUsage } from './remote.ts';
import { replayUsage } from './replay.ts';
import { serveUsage } from './serve.ts';
import { sessionUsage } from './session.ts';
import { turnUsage } from './turn.ts';
import { workspaceUsage } from './workspace.ts';

export const overview = `berth: control plane for agent execution environments

commands:
  serve      start the runtime and its HTTP API
  host       serve this machine's commands to a control plane (the remote provider) over a socket or TLS
  exec       run a command, like docker exec (-i stdin, -t terminal, -d detach)
  logs       print an execution's output (-f to follow it, --tail N)
  ps         list active allocations and running executions (-a: every execution)
  env        manage environments, their allocations and content (push, build, versions, activate)
  workspace  manage workspaces (create, ls, show, rm, history, checkpoints, diff, mount, detach)
  lease      bind work to a machine by key; acquire, pause, hold, resume, release it (ls, get)
  session    create a session bound to an environment and/or a workspace
  turn       open and release a tool turn (it holds the session's workspace); checkpoint and restore in it
  cp         copy files between this machine and a session's workspace
  run        the same as exec
  events     print the event log (--follow to keep tailing)
  replay     print a stream's events with the machine state before -> after each
  check-history  fold every actor stream through today's machines; name each event they would fold differently
  projections    the server's read models (position, lag, failure); rebuild NAME after a fix (admin)
  help       this text (also --help); --version prints the version
  runtime        the runtimes sharing the event store; retire ID adopts one's unfinished actors here (admin)

  Every command but serve (and host):
${remoteUsage}
  With no server, env, events, replay and exec run in this process on the data directory.

${serveUsage}

${execUsage}

${logsUsage}

${psUsage}

${workspaceUsage}

${leaseUsage}

${sessionUsage}

${turnUsage}

${cpUsage}

${eventsUsage}

${replayUsage}`;

export async function versionCommand(): Promise<number> {
  console.log(packageVersion);
  return 0;
}

export async function helpCommand(): Promise<number> {
  console.log(overview);
  return 0;
}
