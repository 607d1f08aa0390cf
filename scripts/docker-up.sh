#!/usr/bin/env bash
# Brings up Berth's private Docker engine and its local base image, for CI (.ci/run) and developers (DESIGN §6).
# Idempotent: installs docker.io/busybox-static/bubblewrap from Debian if missing, starts one dockerd (as root) whose
# socket, data, exec state, pidfile and log all live under $BERTH_DOCKER_DIR, waits for it to answer, and imports
# berth-base:latest from a busybox root filesystem (no registry is ever contacted). Its last stdout line is
#   export DOCKER_HOST=unix://…/docker.sock
# so callers can `eval "$(scripts/docker-up.sh | tail -n 1)"`; the same line is written to $BERTH_DOCKER_DIR/env.
set -euo pipefail

DIR=${BERTH_DOCKER_DIR:-/tmp/berth-docker}
SOCK="$DIR/docker.sock"
LOG="$DIR/dockerd.log"
PIDFILE="$DIR/dockerd.pid"
IMAGE=${BERTH_BASE_IMAGE:-berth-base:latest}
WAIT_SECONDS=${BERTH_DOCKER_WAIT:-60}
export DOCKER_HOST="unix://$SOCK"

say() { echo "docker-up: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (dockerd needs it)"

# Debian's docker.io brings dockerd, containerd, runc, tini (docker-init) and the iptables it needs.
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
# The image needs a busybox that runs without the host's libc: only busybox-static's does.
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
command -v bwrap >/dev/null || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$DIR"
chmod 0711 "$DIR"

answers() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }
# A pidfile left by a killed dockerd may name a pid reused by something else: only a live dockerd counts.
dockerd_alive() { [ -f "$PIDFILE" ] && [ "$(cat "/proc/$(cat "$PIDFILE")/comm" 2>/dev/null)" = dockerd ]; }

start_dockerd() {
  rm -f "$PIDFILE" "$SOCK"
  # No default bridge (--bridge=none): Berth gives every allocation its own labelled bridge network, and this
  # engine must not fight a system dockerd over docker0.
  say "starting dockerd (log: $LOG)"
  nohup setsid dockerd \
    --host "unix://$SOCK" \
    --data-root "$DIR/data" \
    --exec-root "$DIR/exec" \
    --pidfile "$PIDFILE" \
    --bridge=none \
    >>"$LOG" 2>&1 </dev/null &
  started_here=1
}

started_here=
if answers; then
  say "dockerd already answers on $SOCK"
else
  if dockerd_alive; then
    say "dockerd $(cat "$PIDFILE") is running but not answering yet"
  else
    start_dockerd
  fi
  deadline=$((SECONDS + WAIT_SECONDS))
  until answers; do
    if [ $SECONDS -ge $deadline ]; then
      say "dockerd did not answer on $SOCK within ${WAIT_SECONDS}s; last lines of $LOG:"
      tail -n 30 "$LOG" >&2 || true
      exit 1
    fi
    # The pidfile appears a moment after the start; a dockerd we did not start may have been on its way out.
    if [ -f "$PIDFILE" ] && ! dockerd_alive; then
      if [ -n "$started_here" ]; then
        say "dockerd exited; last lines of $LOG:"
        tail -n 30 "$LOG" >&2 || true
        exit 1
      fi
      start_dockerd
    fi
    sleep 0.5
  done
  say "dockerd $(docker info --format '{{.ServerVersion}}') answers on $SOCK"
fi

# The base image: busybox-static with its applets, a uid 1000 user, and nothing else.
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "$IMAGE already present"
else
  say "importing $IMAGE from busybox-static"
  rootfs=$(mktemp -d "$DIR/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,home/user,proc,sys,dev,berth}
  cp /bin/busybox "$rootfs/bin/busybox"
  # --list-full prints each applet's install path (bin/sh, usr/bin/awk, …).
  for applet in $("$rootfs/bin/busybox" --list-full); do
    [ "$applet" = bin/busybox ] && continue
    mkdir -p "$rootfs/$(dirname "$applet")"
    ln -sf /bin/busybox "$rootfs/$applet"
  done
  [ -e "$rootfs/bin/sh" ] || die "busybox has no sh applet"
  cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
  cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
user:x:1000:
nogroup:x:65534:
GROUP
  chmod 1777 "$rootfs/tmp"
  chmod 0700 "$rootfs/root"
  chown 1000:1000 "$rootfs/home/user"
  tar --numeric-owner -C "$rootfs" -c . \
    | docker import \
        --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV HOME=/home/user' \
        --change 'WORKDIR /home/user' \
        --change 'CMD ["/bin/sh"]' \
        --message 'berth base image: busybox-static' \
        - "$IMAGE" >/dev/null
  say "imported $IMAGE"
fi

echo "export DOCKER_HOST=$DOCKER_HOST" >"$DIR/env"
echo "export DOCKER_HOST=$DOCKER_HOST"
