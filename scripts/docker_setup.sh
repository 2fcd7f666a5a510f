#!/usr/bin/env bash
# Make Docker usable on a Debian machine (run as root): install Debian's docker.io, docker-compose (v1.29)
# and debootstrap when missing, start dockerd in the background when no daemon answers, and wait for it.
# Idempotent: a machine that already has a daemon is left as it is. dockerd's log: /tmp/phylorl-dockerd.log.
set -euo pipefail

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  echo "[docker_setup] apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
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
echo "[docker_setup] docker $(docker version -f '{{.Server.Version}}'), $(docker-compose version --short 2>/dev/null \
  || docker compose version --short)"
