#!/bin/sh
# Berth native launcher: starts supervisors (supervisor.sh) for the runtime from a small shell, so the runtime never
# forks its own large process (a fork copies its page tables: milliseconds on its event loop for every command).
#
# The runtime starts ONE launcher, detached (its own session, stdio pipes, an empty environment, cwd /), with the
# path of supervisor.sh as its argument: the launcher sources it once (functions only), so a request can run a
# supervisor as `_bsv_main run ...` in its forked subshell instead of starting a shell that parses the script again.
# The runtime writes one request per line on its stdin:
#   SEQ COMMAND      a program: COMMAND ends with its exec; a second subshell waits for it and answers its status
#   rSEQ COMMAND     a supervisor or a spare (`_bsv_main ...`, `_bsv_spare ...`, never an exec): its subshell
#                    answers its own end from its EXIT trap, one fork less per command (on a virtual machine whose
#                    page-table changes are costly, ~4 ms of CPU of the ~28 a supervised command costs its host)
# SEQ is the runtime's token for the request ([0-9]+). COMMAND is one line of sh, eval'd in a background subshell:
# the runtime builds it from single-quoted words only, a newline inside a word written as '"$_l_nl"'. It ends with
# an exec of the program or a call of `_bsv_main`, so the process waited for is the program or the supervisor itself
# (a supervisor claims with its own pid and start time).
# The program's stdio is /dev/null, as for any detached start; only the launcher's answers use its stdout.
# The launcher answers on stdout, one line per event (each a single write, so answers never mix):
#   s SEQ PID        the program started as process PID
#   x SEQ STATUS     it exited; STATUS as sh reports it: the exit code, 128+n when killed by signal n
# An rSEQ request's `x` is written by its own subshell on fd 7, the launcher's stdout (a socket: /proc/PID/fd/1
# cannot reopen it), which supervisor.sh closes for everything it starts; killed by a signal it answers nothing:
# the runtime then sees its pid gone (supervisor-launcher.ts). Its EXIT trap first runs `$_bsv_atexit` (a spare's
# cleanup, supervisor.sh).
#
# EOF on stdin (the runtime stopped or died) ends the launcher; what it started keeps running, and their waiting
# subshells end when they do; every spare (a request `_bsv_spare DIR ...`, see supervisor.sh) still waiting is told
# to end. A request read after the runtime died is still started: a supervisor's claim decides
# whether it may run (recovery may have fenced the operation meanwhile).

_bsv_library=1
. "$1"
_l_nl='
'
while read -r _l_seq _l_cmd; do
  # Spares' directories share one parent (the runtime's spare root): remembered to end those still waiting at EOF.
  case $_l_cmd in "_bsv_spare "*) eval "set -- ${_l_cmd#_bsv_spare }"; _l_spares=${1%/*} ;; esac
  case $_l_seq in
    r*)
      _l_seq=${_l_seq#r}
      (
        trap '_l_rc=$?; eval "${_bsv_atexit:-}"; echo "x $_l_seq $_l_rc" >&7' EXIT
        eval "$_l_cmd"
      ) 7>&1 </dev/null >/dev/null 2>&1 &
      echo "s $_l_seq $!"
      ;;
    *)
      (
        ( eval "$_l_cmd" ) </dev/null >/dev/null 2>&1 &
        echo "s $_l_seq $!"
        wait "$!"
        echo "x $_l_seq $?"
      ) &
      ;;
  esac
done
# The runtime is gone: spares still waiting for a request (a plain one, and contained ones with their sandboxes)
# would wait until they expire.
if [ -n "${_l_spares:-}" ]; then
  for _l_d in "$_l_spares"/*; do _bsv_unspare "$_l_d"; done
fi

