#!/bin/sh
# Berth execution supervisor, spool protocol version 1.
#
# One tiny POSIX sh program (dash and busybox ash; no bash-isms, no GNU-only flags) that runs ONE command for the
# host, detached from it, and leaves everything a reader needs on disk: the output, the process identity and a
# receipt. The same file runs on a borrowed host (native provider) and inside containers (docker provider, busybox
# sh, uid 1000, read-only root), so output and exit status survive the Berth runtime being SIGKILLed.
#
# USAGE
#   supervisor.sh run OPDIR [-C CWD] [-i] [-t TIMEOUT_MS] [-g GRACE_MS] -- ARGV...
#   supervisor.sh cancel OPDIR [-g GRACE_MS]
#
#   The host starts `run` detached, outside its own session (a new session, or the session of a detached launcher:
#   native/launcher.sh; stdio on /dev/null), so it gets no SIGHUP nor any signal meant for the host's process group,
#   and outlives the host. A host may also source this file with `_bsv_library=1` (it then only defines functions)
#   and call `_bsv_main run|cancel ...` in a forked subshell: the native launcher does, which saves starting a shell
#   and parsing this file for every command. There fd 7 is the launcher's answer channel to the runtime: every
#   process the supervisor starts gets it closed (`7>&-`), so no command can forge the launcher's answers.
#   Its environment IS the command's environment (already filtered by the host, plus the PWD
#   any sh exports); the supervisor uses only `_bsv_`-prefixed shell variables, which it never exports, and restores
#   PATH before exec (dash adds only PWD after `cd`; busybox ash also exports SHLVL).
#   Needs on its own PATH (it prepends the usual system directories): setsid, sleep; mkfifo with -i. Linux /proc
#   is used when present to ignore zombies while draining.
#   Exit status of `run`: 0 the receipt is written; 2 usage error (nothing written); 3 the claim was already taken
#   (another submit or a recovery abandon won; nothing touched).
#
# SPOOL LAYOUT: <spool>/<operationId>/, operationId matching [A-Za-z0-9_.-]{1,128} (never "." or "..").
#   The host creates OPDIR, may write `spec.json` (informational: the request as the host saw it), then starts the
#   supervisor. Files, in the order they appear:
#   claim     Created with O_EXCL (sh noclobber `set -C`) by whoever comes first; that creator owns the operation.
#             Content, one line: `supervisor <pid> [<starttime>]` (this script; its start time in clock ticks since
#             boot, field 22 of /proc/<pid>/stat, when /proc is readable: with the pid, an identity that survives pid
#             reuse), `abandoned` (recovery declared the operation absent:
#             it must never start), or `pty <pid> <starttime>` (a host-owned PTY run, see below). A `run` that
#             finds the claim taken exits 3 without touching anything: an operation is never started twice, and
#             never started after recovery fenced it.
#   stdin     FIFO, only with -i. The command opens it for reading before it starts, so it waits until a writer
#             opens it; EOF when every writer closed it (the host holds the writer: a host crash means EOF).
#   stdout    Append-only (O_APPEND) byte stream of the command's fd 1 ...
#   stderr    ... and of its fd 2. Created by the command's redirections; a missing file reads as empty.
#   started   One JSON line `{"supervisor":S,"pid":P,"pgid":G}` (S the supervisor's pid) written once the command is launched. The command
#             runs as the leader of its own session and process group (setsid), so G = P. Its mtime is the
#             start time.
#   cancel    Marker: cancellation was requested (written by `cancel` before any signal is sent).
#   timedout  Marker: the -t timeout fired (written by the timer before it stops the process group).
#   receipt   One JSON line, written once with O_EXCL after the command exited AND every other member of its
#             process group is gone (zombies ignored), i.e. every writer of stdout/stderr is closed:
#               {"v":1,"status":N|null,"cancelled":true|false,"timedOut":true|false,"error":"..."}
#             status is the sh wait status: 0..128 an exit code, 128+n killed by signal n (POSIX sh cannot tell
#             `exit 130` from SIGINT); null when the command never started (cancelled first, or `error` says why:
#             "cwd" cannot cd to CWD, "stdin" cannot make the FIFO, "setsid" not found). A reader accepts the
#             receipt only when it is a complete line ending in "\n" (an empty file = not yet / writer died).
#             Its mtime is the exit time. Receipt present = exited and drained: the output files are final.
#   sizes     Written by the FIRST host reader that sees the receipt (O_EXCL): the final byte count of each stream,
#             `{"stdout":N,"stderr":N,"pty":N}`. Later readers use it, so every reader agrees on where the output
#             ends even if an escaped process (one that called setsid itself) keeps appending.
#   pty       (host-owned, native only) the PTY byte stream. A PTY run is not supervised by this script: the host
#             claims `pty <pid> <starttime>`, runs the command on a pseudo-terminal, appends everything it reads to
#             `pty`, and writes `receipt` itself (write receipt.tmp, rename). It does not survive a host crash: the
#             claim then names a dead process and readers report the operation as having no receipt (unknown).
#
# RECEIPT STATES as a reader derives them: no claim -> absent (not submitted yet); claim `abandoned` -> absent
# forever; valid receipt -> exited; claim by a live owner -> running; claim by a dead owner and no receipt ->
# absent forever (the outcome cannot be proven; the operation is never run again).
#
# CANCEL (`supervisor.sh cancel OPDIR`): write `cancel`; if the operation has no `started` yet, wait for `started`
# or a receipt (the supervisor re-checks `cancel` right before launching and then writes a cancelled receipt
# without starting anything); then SIGTERM the process group (and the command's pid: right after launch it may not
# have made its group yet), and SIGKILL them if any is still alive after GRACE_MS (default 2000). The timeout
# (-t) runs the same stop sequence from a timer, after writing `timedout`. Readers then wait for the receipt (and
# the supervisor's exit right after it). Background jobs of a non-interactive sh ignore SIGINT and SIGQUIT (POSIX),
# and so does the command: cancellation uses TERM and KILL only. A process that escapes with its own setsid is not
# in the group: neither waited for nor stopped (under bubblewrap's pid namespace it ends with the command).
#
# RELEASE: the host removes OPDIR once it has saved the output elsewhere.

_bsv_usage() { echo "usage: supervisor.sh run OPDIR [-C CWD] [-i] [-t MS] [-g MS] -- ARGV... | cancel OPDIR [-g MS]" >&2; exit 2; }

# Sleeps $1 milliseconds (fractional sleep where supported, else whole seconds, rounded up).
_bsv_sleep() {
  _bsv_ms=$((1000 + $1 % 1000))
  sleep "$(($1 / 1000)).${_bsv_ms#1}" 2>/dev/null || sleep $((($1 + 999) / 1000))
}

# True while process $1 lives (a zombie, an unreaped orphan, does not).
_bsv_pid_live() {
  kill -0 "$1" 2>/dev/null || return 1
  read -r _bsv_l 2>/dev/null <"/proc/$1/stat" || return 0
  _bsv_l=${_bsv_l##*) }
  [ "${_bsv_l%% *}" != Z ]
}

# True while process group $1 has a live member.
_bsv_live() {
  kill -0 -"$1" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for _bsv_f in /proc/[0-9]*/stat; do
    read -r _bsv_l 2>/dev/null <"$_bsv_f" || continue
    _bsv_l=${_bsv_l##*) }   # fields after the command name: state ppid pgrp ...
    _bsv_st=${_bsv_l%% *}
    _bsv_l=${_bsv_l#* }
    _bsv_l=${_bsv_l#* }
    [ "${_bsv_l%% *}" = "$1" ] && [ "$_bsv_st" != Z ] && return 0
  done
  return 1
}

# TERM to the command $1 and its process group, then KILL once $2 ms have passed with any of them alive. The
# command itself is signalled too: right after launch it may not have made its own group yet.
_bsv_stop_group() {
  kill -TERM -"$1" 2>/dev/null
  kill -TERM "$1" 2>/dev/null
  _bsv_waited=0
  while _bsv_live "$1" || _bsv_pid_live "$1"; do
    if [ "$_bsv_waited" -ge "$2" ]; then
      kill -KILL -"$1" 2>/dev/null
      kill -KILL "$1" 2>/dev/null
    fi
    _bsv_sleep 50
    _bsv_waited=$((_bsv_waited + 50))
  done
  return 0
}

# Prints the pgid recorded in OPDIR/started, or nothing.
_bsv_started_pgid() {
  read -r _bsv_l 2>/dev/null <"$1/started" || return 0
  _bsv_l=${_bsv_l#*\"pgid\":}
  echo "${_bsv_l%%[!0-9]*}"
}

_bsv_receipt() {  # status-or-null [error]
  _bsv_c=false; [ -e "$_bsv_dir/cancel" ] && _bsv_c=true
  _bsv_t=false; [ -e "$_bsv_dir/timedout" ] && _bsv_t=true
  _bsv_e=; [ -n "$2" ] && _bsv_e=",\"error\":\"$2\""
  set -C
  printf '{"v":1,"status":%s,"cancelled":%s,"timedOut":%s%s}\n' "$1" "$_bsv_c" "$_bsv_t" "$_bsv_e" >"$_bsv_dir/receipt"
  set +C
  exit 0
}

# Sets _bsv_self to this process's pid and _bsv_since to its start time (empty without /proc). In a subshell $$ is
# the parent's pid; /proc/self, opened by the shell's own redirection, is the subshell itself.
_bsv_whoami() {
  _bsv_self=$$
  _bsv_since=
  read -r _bsv_l 2>/dev/null </proc/self/stat || return 0
  _bsv_self=${_bsv_l%% *}
  _bsv_l=${_bsv_l##*) }   # fields from the state on: the start time is the 20th of them (field 22)
  _bsv_field20 $_bsv_l
}
_bsv_field20() { _bsv_since=${20}; }

# Sets _bsv_setsid to setsid's path (a PATH lookup without forking a $(command -v) subshell); false when missing.
_bsv_find_setsid() {
  _bsv_setsid=
  _bsv_p=$PATH:
  while [ -n "$_bsv_p" ]; do
    [ -x "${_bsv_p%%:*}/setsid" ] && _bsv_setsid=${_bsv_p%%:*}/setsid && return 0
    _bsv_p=${_bsv_p#*:}
  done
  return 1
}

# SPARE (native launcher only): `_bsv_spare SPAREDIR`, in a subshell the launcher forked ahead of need, makes the
# command's process at once (setsid: the leader of its own session and process group; it waits for a newline on the
# FIFO SPAREDIR/go, then sources SPAREDIR/line) and then waits for its request on the FIFO SPAREDIR/req. Starting a
# command then costs no fork, setsid or shell start. The request is one brace group of sh, written in one write (a truncated one is a
# syntax error and runs nothing): `{ set -- run OPDIR [options] -- ARGV...; _bsv_go=LINE; }`, LINE being the sh the
# command's process evaluates (redirections, cd, exports, exec of the command); or `exit 0` (not needed any more).
# The request then goes on as `run`; a spare that ends without being used (an `exit 0` request, or 30 s without one)
# kills its command's process.
#
# A CONTAINED spare (`_bsv_spare SPAREDIR -o OUTDIR -- PREFIX...`) makes the sandbox itself ahead of need: its command
# process is PREFIX (the allocation's limits, the privilege drop and bwrap, ending in a pid-1 shell) with stdout and
# stderr already appended to OUTDIR/stdout and OUTDIR/stderr, the read end of SPAREDIR/go on fd 3 and the write end
# of SPAREDIR/up on fd 4 (the pid-1 shell writes a line there once the sandbox is up), so a command costs no sandbox
# start. OUTDIR is a directory of the spool root whose two files the host links into the
# operation's directory (and unlinks here) before its request; the line (cd, exports, the command) is written into the FIFO itself, since nothing of the host
# is visible inside. No stdin: it is for requests without one. An unused contained spare removes OUTDIR.
_bsv_spare() {
  _bsv_sdir=$1
  _bsv_sout=
  if [ "${2:-}" = -o ]; then _bsv_sout=$3; shift 4; else shift; fi
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
  _bsv_find_setsid || exit 2
  mkfifo -m 600 "$_bsv_sdir/req" "$_bsv_sdir/go" || exit 2
  if [ -n "$_bsv_sout" ]; then
    mkfifo -m 600 "$_bsv_sdir/up" && mkdir -m 755 "$_bsv_sout" && : >"$_bsv_sout/stdout" && : >"$_bsv_sout/stderr" || exit 2
    "$_bsv_setsid" "$@" </dev/null >>"$_bsv_sout/stdout" 2>>"$_bsv_sout/stderr" 3<"$_bsv_sdir/go" 4>"$_bsv_sdir/up" 7>&- &
  else
    # Its environment is the launcher's (PWD only); `_l_nl` is how a request's words write a newline.
    # It reads one newline from the FIFO, then sources the line from SPAREDIR/line (a FIFO is read a byte at a time).
    "$_bsv_setsid" /bin/sh -c '_l_nl="
"; exec <"$1/go" || exit 125; read -r _l || exit 125; . "$1/line"; exit 125' sh "$_bsv_sdir" </dev/null >/dev/null 2>&1 7>&- &
  fi
  _bsv_spid=$!
  # Run at exit by the launcher's EXIT trap of this request's subshell (launcher.sh: it answers the spare's end
  # after), or by its own trap when it runs outside a launcher.
  _bsv_atexit='[ -z "$_bsv_spid" ] || { kill -KILL "$_bsv_spid" 2>/dev/null; [ -z "$_bsv_sout" ] || rm -rf "$_bsv_sout"; }'
  [ -n "${_l_seq:-}" ] || trap 'eval "$_bsv_atexit"' EXIT
  # An unused spare ends after SPARE_SECONDS, so none outlives a launcher that was killed (no EOF to tell it).
  trap 'exit 0' TERM
  _bsv_whoami
  (
    trap '[ -n "$_bsv_s" ] && kill "$_bsv_s" 2>/dev/null; exit 0' TERM
    sleep "${_bsv_spare_seconds:-30}" &
    _bsv_s=$!
    wait "$_bsv_s" && kill -TERM "$_bsv_self"
  ) </dev/null >/dev/null 2>&1 7>&- &
  _bsv_expiry=$!
  # A contained spare's process opens the FIFO after its output files: opened write-only first, it is waited for,
  # so the host never takes the files (links them into an operation) before the sandbox holds them.
  [ -z "$_bsv_sout" ] || exec 9>"$_bsv_sdir/go"
  # Held read-write until this supervisor ends: the line never waits for a reader, nor is lost before it reads.
  exec 9<>"$_bsv_sdir/go"
  # And it is ready once its sandbox is up: its pid-1 shell says so on SPAREDIR/up (EOF: it died first).
  if [ -n "$_bsv_sout" ]; then read -r _bsv_l <"$_bsv_sdir/up" || exit 2; fi
  _bsv_go=
  : >"$_bsv_sdir/ready"   # for hosts that wait until the spare waits (benchmarks)
  . "$_bsv_sdir/req"
  kill "$_bsv_expiry" 2>/dev/null
  trap - TERM
  [ -n "$_bsv_go" ] || exit 0
  _bsv_main "$@"
}

# Ends a spare still waiting for its request (its FIFO opened read-write never blocks; a used spare reads nothing).
_bsv_unspare() {
  [ -p "$1/req" ] || return 0
  exec 8<>"$1/req"
  echo 'exit 0' >&8
  exec 8>&-
}

_bsv_main() {
  [ $# -ge 2 ] || _bsv_usage
  _bsv_mode=$1
  _bsv_dir=$2
  shift 2
  case $_bsv_dir in /*) ;; *) _bsv_usage ;; esac
  [ -d "$_bsv_dir" ] || _bsv_usage
  _bsv_cwd=
  _bsv_stdin=
  _bsv_timeout=
  _bsv_grace=2000
  while [ $# -gt 0 ]; do
    case $1 in
      -C) [ $# -ge 2 ] || _bsv_usage; _bsv_cwd=$2; shift 2 ;;
      -i) _bsv_stdin=1; shift ;;
      -t) [ $# -ge 2 ] || _bsv_usage; _bsv_timeout=$2; shift 2 ;;
      -g) [ $# -ge 2 ] || _bsv_usage; _bsv_grace=$2; shift 2 ;;
      --) shift; break ;;
      *) _bsv_usage ;;
    esac
  done
  case $_bsv_timeout$_bsv_grace in *[!0-9]*) _bsv_usage ;; esac

  # The command's PATH is restored right before exec; the supervisor itself needs the system tools.
  _bsv_path=$PATH
  _bsv_path_set=${PATH+1}
  _bsv_oldpwd_set=${OLDPWD+1}   # `cd` sets OLDPWD; the command must not see one it was not given
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}

  if [ "$_bsv_mode" = cancel ]; then
    : >"$_bsv_dir/cancel"
    _bsv_n=0
    while [ ! -s "$_bsv_dir/started" ] && [ ! -s "$_bsv_dir/receipt" ]; do
      read -r _bsv_l 2>/dev/null <"$_bsv_dir/claim" || exit 0   # never claimed: nothing to stop
      case $_bsv_l in "supervisor "*) kill -0 "${_bsv_l#supervisor }" 2>/dev/null || exit 0 ;; *) exit 0 ;; esac
      [ "$_bsv_n" -lt 200 ] || exit 0
      _bsv_sleep 10
      _bsv_n=$((_bsv_n + 1))
    done
    [ -s "$_bsv_dir/receipt" ] && exit 0
    _bsv_g=$(_bsv_started_pgid "$_bsv_dir")
    [ -n "$_bsv_g" ] && _bsv_stop_group "$_bsv_g" "$_bsv_grace"
    exit 0
  fi

  [ "$_bsv_mode" = run ] && [ $# -ge 1 ] || _bsv_usage

  _bsv_whoami
  # CLAIM: noclobber turns `>` into an O_EXCL create, so exactly one claimant wins.
  set -C
  { echo "supervisor $_bsv_self${_bsv_since:+ $_bsv_since}" >"$_bsv_dir/claim"; } 2>/dev/null || exit 3
  set +C

  [ -n "${_bsv_spid:-}" ] || _bsv_find_setsid || _bsv_receipt null setsid
  if [ -n "$_bsv_cwd" ]; then cd "$_bsv_cwd" 2>/dev/null || _bsv_receipt null cwd; fi
  _bsv_in=/dev/null
  if [ -n "$_bsv_stdin" ]; then
    mkfifo -m 600 "$_bsv_dir/stdin" 2>/dev/null || _bsv_receipt null stdin
    _bsv_in=$_bsv_dir/stdin
  fi
  [ -e "$_bsv_dir/cancel" ] && _bsv_receipt null

  # A contained spare's sandbox that is gone (killed in its control group, say) is passed over: ARGV is then the
  # whole sandbox argv, started the ordinary way.
  if [ -n "${_bsv_spid:-}" ] && { [ -z "${_bsv_sout:-}" ] || kill -0 "$_bsv_spid" 2>/dev/null; }; then
    # A spare's command process (_bsv_spare): the line makes it the command, with its redirections, cwd and env
    # (a contained one reads the line from the FIFO: its output files are already the operation's).
    if [ -n "${_bsv_sout:-}" ]; then
      printf '%s\n' "$_bsv_go" >&9
    else
      printf '%s\n' "$_bsv_go" >"$_bsv_sdir/line"
      echo >&9
    fi
    _bsv_pid=$_bsv_spid
    _bsv_spid=
  else
    (
      if [ -n "$_bsv_path_set" ]; then PATH=$_bsv_path; else unset PATH; fi
      [ -n "$_bsv_oldpwd_set" ] || unset OLDPWD
      exec "$_bsv_setsid" -- "$@"
    ) <"$_bsv_in" >>"$_bsv_dir/stdout" 2>>"$_bsv_dir/stderr" 7>&- &
    _bsv_pid=$!
  fi
  echo "{\"supervisor\":$_bsv_self,\"pid\":$_bsv_pid,\"pgid\":$_bsv_pid}" >"$_bsv_dir/started"

  _bsv_timer=
  if [ -n "$_bsv_timeout" ]; then
    (
      # The sleep runs in the background so the supervisor's TERM interrupts `wait` and the trap ends it too.
      _bsv_s=
      trap '[ -n "$_bsv_s" ] && kill "$_bsv_s" 2>/dev/null; exit 0' TERM
      _bsv_ms=$((1000 + _bsv_timeout % 1000))
      sleep "$((_bsv_timeout / 1000)).${_bsv_ms#1}" 2>/dev/null &
      _bsv_s=$!
      if ! wait "$_bsv_s"; then   # no fractional sleep here: whole seconds, rounded up
        sleep $(((_bsv_timeout + 999) / 1000)) &
        _bsv_s=$!
        wait "$_bsv_s"
      fi
      _bsv_s=
      : >"$_bsv_dir/timedout"
      _bsv_stop_group "$_bsv_pid" "$_bsv_grace"
    ) 7>&- &
    _bsv_timer=$!
  fi

  wait "$_bsv_pid"
  _bsv_status=$?

  # Drained: no member of the command's process group is left (they may still hold stdout/stderr open).
  _bsv_d=10
  while _bsv_live "$_bsv_pid"; do
    _bsv_sleep "$_bsv_d"
    [ "$_bsv_d" -lt 200 ] && _bsv_d=$((_bsv_d * 2))
  done

  if [ -n "$_bsv_timer" ]; then
    kill "$_bsv_timer" 2>/dev/null
    wait "$_bsv_timer"
  fi
  _bsv_receipt "$_bsv_status"
}

# Sourced by a host that calls _bsv_main itself (the native launcher); run as a program otherwise.
[ "${_bsv_library:-}" = 1 ] || _bsv_main "$@"

