/**
 * Every command's usage text, in one module with no imports: `berth help` prints them all without loading a
 * command module, and each command reads its own from here.
 */
export const remoteUsage = `  Talks to the server at --url URL (or BERTH_URL), else to the \`berth serve\` holding the data directory
  (BERTH_DATA_DIR, default ./.berth); --token TOKEN (BERTH_TOKEN, default the admin token in the data directory).`;

export const checkHistoryUsage = `usage: berth check-history [--data-dir DIR | --store SPEC] [--json]
  Folds every actor stream through today's machines; names each event they would refuse or fold differently.
  Exit 0 when the log replays the same, 1 when it does not.`;

export const cpUsage = `usage: berth cp [-r] [--turn TURN] [--wait MS] SRC DST
  Copies between this machine and a session's workspace: one of SRC and DST is SESSION:PATH (PATH relative to the
  workspace root, empty for the root), the other a host path (write a host path with a colon as ./like:this).
  Without --turn it opens a turn of the session for the copy and releases it after (--wait MS waits for a busy
  workspace); with --turn it copies inside that open turn. A destination that is an existing directory receives the
  file under its own name. -r copies a directory and everything under it (links and special files are skipped, with
  a note). Each file is at most 64 MiB (the workspace file tools' limit) and travels as one streamed request.
${remoteUsage}`;

export const envUsage = `usage: berth env create NAME [--provider native|docker] [--image IMAGE] [--memory-mb N] [--cpus N]
                        [--pids-limit N] [--network none|bridge] [--idle-seconds N] [--reuse session|workspace|scope]
                        [--contain] [--description TEXT]
       berth env ls
       berth env show ENV
       berth env acquire ENV
       berth env release ENV [ALLOCATION_ID]
       berth env rm ENV
       berth env push ENV DIR [--replace]
       berth env build ENV [--follow]
       berth env versions ENV
       berth env activate ENV VERSION
  ENV is an environment id, name or slug. push imports DIR into ENV's source as a tar stream (node_modules, .venv and
  .git left out), with --replace clearing the source first; build starts the next version (--follow prints the
  installers' log until it is ready or failed); versions lists every build and the active one; activate makes a
  finished version the active one. Common flags: --json, --data-dir DIR.
${remoteUsage}
  With no server, the runtime runs in this process on the data directory, as an admin of --scope SCOPE (default
  "default") with --store SPEC; a build started there runs to its end before the command exits.`;

export const eventsUsage = `usage: berth events [--follow] [--after POSITION] [--prefix STREAM_PREFIX]... [--json] [--data-dir DIR]
  Prints every event of the log in global order (after POSITION, exclusive); --follow keeps printing new ones until
  Ctrl-C. A server shows the audit feed of the token's scope.
${remoteUsage}
  With no server, the data directory's store (or --store SPEC) is read in this process.`;

export const execUsage = `usage: berth exec [-i] [-t] [-d] [--operation-id ID] [--cwd DIR] [--env NAME=VALUE]... [--timeout MS]
                  [--url URL] [--token TOKEN] ENV -- COMMAND [ARG...]
       berth exec [options] --session SESSION [--turn TURN] -- COMMAND [ARG...]
  Runs COMMAND in the environment ENV (id, name or slug), streams its output and exits with its exit code: 127 when
  the command is not found, 126 when it cannot be executed, 124 when --timeout ended it, 128+n when signal n
  killed it, 125 when Berth could not run it (a wrong environment, a missing engine) or its outcome is unknown.
  -i forwards stdin; -t runs it on a terminal of this terminal's size. -d (--detach) starts it, prints its id and
  leaves it running. Without -t, Ctrl-C cancels the command after a second unless a second Ctrl-C detaches (it
  keeps running: \`berth logs -f ID\` follows it). A repeated --operation-id re-attaches to the first run instead
  of running twice. --session runs it in the session's environment; with --turn (a tool turn of that session:
  \`berth turn open\`) it runs in the session's workspace, its cwd relative to the session's, and holds the turn
  until it ends. \`berth run\` is the same command.
${remoteUsage}
  With no server it runs through a runtime in this process on the data directory (not with --session or -d).`;

export const leaseUsage = `usage: berth lease ls [--work-kind KIND] [--work-id ID]
       berth lease get KEY
       berth lease bind KEY --work KIND:ID (--profile-json JSON | --environment ENV) [--workspace WORKSPACE] [--idle SECONDS]
       berth lease acquire KEY [--suspend]
       berth lease pause KEY --cause KIND [--retry-at ISO | --retry-in SECONDS]
       berth lease hold KEY
       berth lease resume KEY
       berth lease release KEY
  bind ties work to a lease by your key and allocates nothing; acquire gives its machine (made at the first acquire,
  the same one after), prints the target and whether it was reused; with --suspend a spawn refused by a quota or
  policy pauses the lease instead. pause records a cause and a retry time (its timer resumes the work); hold stops
  the timer until resume; a pause longer than the lease's idle interval (--idle, default the profile's) gives the
  machine back, its workspace view saved, and the next acquire makes a new one. release removes the machine and ends
  the lease. Run a command on it with \`POST /v1/executions {lease}\`. Common flag: --json.
${remoteUsage}`;

export const logsUsage = `usage: berth logs [-f] [--tail N] [--stream stdout|stderr|pty] [--url URL] [--token TOKEN] EXECUTION
  Prints the output of EXECUTION (its id, or the operationId it was submitted with); -f follows it until it ends;
  --tail N starts each stream at its last N lines. A finished execution's exit status ends the output (on stderr).
${remoteUsage}`;

export const projectionsUsage = `usage: berth projections [ls] [--json] | berth projections rebuild NAME [--json]
  Lists the read models with their position, lag and failure; rebuild folds one again from the first event
  (after a fix for the event it failed on). Admin token only.
${remoteUsage}`;

export const psUsage = `usage: berth ps [-a] [--json] [--url URL] [--token TOKEN]
  Lists the active allocations and the unfinished executions of the token's scope; -a (--all) lists every execution,
  finished ones too, with their exit status.
${remoteUsage}`;

export const replayUsage = `usage: berth replay STREAM|ID [--at REVISION] [--json] [--data-dir DIR]
       berth replay --operation OPID [--at REVISION] [--json] [--data-dir DIR]
  Prints every event of STREAM with the state before -> after; --at stops at that revision. A bare id (hexe_…,
  henv_…, hwsp_…, …) names its resource's stream; --operation the execution submitted with that operationId.
${remoteUsage}
  With no server, the data directory's store (or --store SPEC) is read in this process, and --operation looks in
  --scope SCOPE (default "default"; a server uses the token's scope).`;

export const runUsage = `usage: berth run [--data-dir DIR] [--store SPEC] [--operation-id ID] [--cwd DIR] [--env NAME=VALUE]...
                 [--timeout MS] [-i|--interactive] [-t|--tty] ENV -- COMMAND [ARG...]
  Runs COMMAND in the environment ENV (its id, name or slug), streams its output and exits with its exit code
  (128+n when killed by signal n, 125 when it could not start or its outcome is unknown). -i forwards stdin;
  -t runs it on a terminal of this terminal's size. Ctrl-C cancels it. A repeated --operation-id never runs twice:
  it re-attaches to the first run and replays its output. This is \`berth exec\` with no server: see berth exec --help.`;

export const serveUsage = `usage: berth serve [--data-dir DIR] [--host HOST] [--port PORT] [--store sqlite|sqlite:/file|esdb://…]
                   [--socket PATH] [--tls-cert FILE --tls-key FILE] [--tokens FILE]
  Starts Berth and its HTTP API. The admin token (BERTH_TOKEN, or generated into DIR/token) acts in scope
  "default"; --tokens FILE (or BERTH_TOKENS_FILE) adds tokens as JSON [{"token","scope","role":"admin"|"member"}].
  --socket listens on a Unix socket (mode 0600) instead of TCP, or as well when --host/--port is given. A host other
  than loopback needs --tls-cert/--tls-key. Environment: BERTH_DATA_DIR, BERTH_HOST, BERTH_PORT,
  BERTH_EVENTSTORE_URL, BERTH_TOKEN, BERTH_TOKENS_FILE, BERTH_MAINTENANCE_MS, BERTH_LOG_LEVEL; streams:
  BERTH_MAX_STREAMS_PER_TOKEN, BERTH_STREAM_STALL_MS; members' ceilings and
  quotas: BERTH_MEMBER_MAX_MEMORY_MB, BERTH_MEMBER_MAX_CPUS, BERTH_MEMBER_MAX_PIDS, BERTH_MEMBER_MAX_HOME_MB,
  BERTH_MEMBER_MAX_WORKSPACE_MB, BERTH_MEMBER_NETWORK,
  BERTH_QUOTA_ENVIRONMENTS, BERTH_QUOTA_CONCURRENT_EXECUTIONS, BERTH_QUOTA_OUTPUT_BYTES, BERTH_QUOTA_SCOPE_OUTPUT_BYTES;
  the event store's room on the data directory's filesystem: BERTH_DISK_RESERVE_MB.`;

export const sessionUsage = `usage: berth session create [--workspace WORKSPACE] [--env ENV] [--cwd DIR] [--parent SESSION [--fork]]
       berth session show SESSION
       berth session rm SESSION
  create prints the new session's id. --workspace binds it to a workspace (its tool turns and file tools work
  there: \`berth turn\`, \`berth cp\`); --cwd is where its commands start, relative to the workspace root; --env is
  the environment its commands run in (id, name or slug); --parent makes it a child (--fork: a fork) of a session,
  inheriting what it does not name. rm stops new turns and commands in it. Common flag: --json.
${remoteUsage}`;

export const turnUsage = `usage: berth turn open SESSION [--key KEY] [--wait MS]
       berth turn show SESSION TURN
       berth turn release SESSION TURN [--wait MS]
       berth turn checkpoint SESSION TURN
       berth turn restore SESSION TURN CHECKPOINT [--expect-revision N]
  open prints the new turn's id; while another turn holds the workspace it fails (workspace_busy) unless --wait
  gives it that long to be released. --key makes opening idempotent (the same key answers the same turn). release
  waits up to --wait (default 30 s) for the turn's commands and calls to end, then gives the storage back.
  checkpoint publishes a checkpoint of the workspace and prints its id (stale_version when its head moved meanwhile);
  restore gives the workspace that checkpoint's tree, recorded in its history as \`restore\`; with --expect-revision
  it is refused (stale_version) and changes nothing unless the head is still revision N.
  Common flag: --json.
${remoteUsage}`;

export const workspaceUsage = `usage: berth workspace create [--name NAME]
       berth workspace ls
       berth workspace show WORKSPACE
       berth workspace rm WORKSPACE
       berth workspace history WORKSPACE
       berth workspace clear WORKSPACE
       berth workspace checkpoints WORKSPACE
       berth workspace checkpoint WORKSPACE CHECKPOINT
       berth workspace diff WORKSPACE FROM TO
       berth workspace mount WORKSPACE
       berth workspace detach WORKSPACE
  create makes a managed workspace (a directory the server makes and owns) and prints its id; rm deletes it with its
  directory (refused while a turn holds it); history prints each tool mutation and each shell command's changes with
  the turn (and execution) that made them; clear (admin) frees a storage whose holder's work is proven stopped.
  checkpoints lists the published checkpoints (sha256:… ids) with the head revision each made; checkpoint prints one's
  tree; diff prints one line per path changed from FROM to TO (\`+\` added, \`-\` removed, \`M\` modified); mount shows
  the workspace's view (its allocation and mount generation); detach saves the view and lets it go.
  Take a checkpoint or restore one in a turn: \`berth turn checkpoint|restore\`.
  Bind a session to a workspace with \`berth session create --workspace WORKSPACE\`. Common flag: --json.
${remoteUsage}`;

export const runtimeUsage = `usage: berth runtime [ls] [--json] | berth runtime retire ID [--json]
  Lists the runtimes sharing the server's event store (epoch, state, URL); retire marks one retired and makes the
  server answering adopt its unfinished actors (it must reach their containers or hosts). Admin token only.
${remoteUsage}`;
