#!/usr/bin/env bash
# Stops the private dockerd started by scripts/docker-up.sh (SIGTERM, then SIGKILL after a grace period).
# Its data (images, volumes) stays under $BERTH_DOCKER_DIR; pass --purge to delete that folder too.
set -euo pipefail

DIR=${BERTH_DOCKER_DIR:-/tmp/berth-docker}
PIDFILE="$DIR/dockerd.pid"
say() { echo "docker-down: $*" >&2; }

if [ -f "$PIDFILE" ] && pid=$(cat "$PIDFILE") && kill -0 "$pid" 2>/dev/null; then
  say "stopping dockerd $pid"
  kill -TERM "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    say "dockerd $pid still running after 30s, killing it"
    kill -KILL "$pid"
  fi
else
  say "no dockerd running from $DIR"
fi
rm -f "$PIDFILE" "$DIR/docker.sock" "$DIR/env"

if [ "${1:-}" = --purge ]; then
  # Mounts left by a killed dockerd would make rm fail halfway: unmount what lives under the folder first.
  { grep -o " $DIR/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$DIR"
  say "removed $DIR"
fi
