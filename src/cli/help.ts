/** `berth help`: the list of commands (from usage.ts alone: no command module is loaded to print it). */
import {
  cpUsage,
  eventsUsage,
  execUsage,
  leaseUsage,
  logsUsage,
  psUsage,
  remoteUsage,
  replayUsage,
  serveUsage,
  sessionUsage,
  turnUsage,
  workspaceUsage,
} from './usage.ts';

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
  runtime        the runtimes sharing the event store; retire ID adopts one's unfinished actors here (admin)
  help       this text (also --help); --version prints the version

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

export async function helpCommand(): Promise<number> {
  console.log(overview);
  return 0;
}
