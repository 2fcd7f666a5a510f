#!/usr/bin/env bash
# Build the phylorl image: one slim, non-root image for every service of deploy/docker-compose.yml
# (replay, learner, actor, and Redis and Prometheus from Debian's packages).
#
#   scripts/build_image.sh [--source wheelhouse|index] [--gpu] [--tag NAME] [--base NAME]
#
#   --source wheelhouse  (default) pip installs with --no-index from deploy/wheelhouse/, which this script
#                        first fills from this machine's pip set-up (`pip wheel`, torch pinned to the CPU
#                        build 2.13.0). The `docker build` itself then needs no network at all.
#   --source index       pip installs from the package index inside `docker build --network host`, trusting
#                        this machine's CA bundle (PIP_CERT or pip's `cert` setting). A torch wheel already in
#                        deploy/wheelhouse/ is used first; else torch comes from TORCH_INDEX_URL
#                        (e.g. https://download.pytorch.org/whl/cpu) or, when that is empty, from the index.
#   --gpu                the learner image for deploy/docker-compose.gpu.yml: --source index, torch from the
#                        index's default (CUDA) build, tag phylorl:gpu.
#   --tag NAME           image name (default phylorl:latest, phylorl:gpu with --gpu).
#   --base NAME          base image (default phylorl-base:bookworm). Made here when missing: a Debian bookworm
#                        minbase root file system (debootstrap) with python3, python3-venv, redis-server and
#                        prometheus, imported with `docker import` (no registry needed).
#
# Environment: DEBIAN_MIRROR (default: the first Debian mirror in apt's sources), TORCH_SPEC (torch==2.13.0),
# TORCH_INDEX_URL. Needs root (debootstrap) and a running Docker daemon (scripts/docker_setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

SOURCE=wheelhouse
GPU=0
TAG=
BASE=phylorl-base:bookworm
while [ $# -gt 0 ]; do
  case "$1" in
    --source) SOURCE=$2; shift 2 ;;
    --gpu) GPU=1; SOURCE=index; shift ;;
    --tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$SOURCE" in
  wheelhouse|index) ;;
  *) echo "build_image.sh: --source must be wheelhouse or index" >&2; exit 2 ;;
esac
[ -n "$TAG" ] || { [ "$GPU" = 1 ] && TAG=phylorl:gpu || TAG=phylorl:latest; }
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
WHEELHOUSE=$REPO/deploy/wheelhouse
PY=${PYTHON:-python3}
started=$(date +%s)
say() { echo "[build_image +$(( $(date +%s) - started ))s] $*"; }

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}')
  [ -n "$uri" ] || uri=$(awk '/^deb / && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

make_base() {
  command -v debootstrap >/dev/null || { echo "debootstrap is missing: run scripts/docker_setup.sh" >&2; exit 1; }
  local rootfs mirror
  rootfs=$(mktemp -d /tmp/phylorl-rootfs.XXXXXX)
  mirror=$(debian_mirror)
  say "base image $BASE: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase --include=python3,python3-venv,redis-server,prometheus \
    bookworm "$rootfs" "$mirror" > "$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; exit 1; }
  # slim: no package caches, lists, documentation or locales, no JavaScript of Prometheus' optional console
  # templates (its web UI is inside the binary), no promtool; Debian's service users stay.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log "$rootfs"/usr/share/javascript \
    "$rootfs"/usr/share/nodejs "$rootfs"/usr/bin/promtool
  find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
  rm -rf "$rootfs" "$rootfs.log"
  say "base image $BASE: $(docker image inspect -f '{{.Size}}' "$BASE" | awk '{printf "%.0f MB", $1/1e6}')"
}

dependencies() {
  # phylorl's run-time dependencies, one requirement a line (from pyproject.toml)
  "$PY" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$REPO/pyproject.toml"
}

local_pip_paths() {
  # absolute paths named by this machine's pip set-up (PIP_* variables, pip config): find-links folders,
  # file:// indexes (their parent folder: the pages link to ../../files), the CA bundle, a constraints file
  { env | grep '^PIP_' | cut -d= -f2-; "$PY" -m pip config list 2>/dev/null | cut -d= -f2-; } \
    | tr -d "'\"" | tr ' ' '\n' | sed -n 's#^file://##; s#/simple/\{0,1\}$##; \#^/#p' | sort -u
}

fill_wheelhouse() {
  # Every wheel the image needs: torch (CPU build, pinned), phylorl's dependencies, and the build backend
  # (setuptools, wheel) so that `pip install --no-index` can build phylorl itself. Refilled only when
  # pyproject.toml's dependencies or TORCH_SPEC change (deploy/wheelhouse/.stamp).
  local stamp
  stamp=$( { echo "$TORCH_SPEC"; dependencies; } | sha256sum | cut -c1-16)
  if [ "$(cat "$WHEELHOUSE/.stamp" 2>/dev/null)" = "$stamp" ]; then
    say "wheelhouse: up to date ($(ls "$WHEELHOUSE"/*.whl | wc -l) wheels)"
    return
  fi
  mkdir -p "$WHEELHOUSE"
  dependencies > "$WHEELHOUSE/.deps.txt"
  # pip runs inside the base image, so that wheels and environment markers are chosen for the image's own
  # Python (e.g. Debian's 3.11.2 needs async-timeout for redis, a newer 3.11 does not). It sees this machine's
  # pip set-up: PIP_* variables, /etc/xdg/pip, and the local directories they name (mounted read-only).
  local mounts=() dir
  for dir in /etc/xdg/pip $(local_pip_paths); do
    [ -e "$dir" ] && mounts+=(-v "$dir:$dir:ro")
  done
  say "wheelhouse: pip wheel in $BASE into deploy/wheelhouse/ ($TORCH_SPEC, phylorl's dependencies, setuptools, wheel)"
  docker run --rm --network host "${mounts[@]}" -v "$WHEELHOUSE:/wheelhouse" \
    $(env | grep '^PIP_' | cut -d= -f1 | sed 's/^/-e /') "$BASE" sh -c \
    "python3 -m venv /tmp/venv && /tmp/venv/bin/pip wheel --disable-pip-version-check -q --wheel-dir /wheelhouse \
     '$TORCH_SPEC' 'setuptools>=68' wheel -r /wheelhouse/.deps.txt" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  echo "$stamp" > "$WHEELHOUSE/.stamp"
  say "wheelhouse: $(ls "$WHEELHOUSE"/*.whl | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1)"
}

make_context() {
  # A clean build context: the sources the image needs, the wheelhouse, and the CA bundle for --source index.
  local ctx=$1
  mkdir -p "$ctx/src/deploy" "$ctx/wheelhouse"
  cp -r pyproject.toml README.md phylorl services protos "$ctx/src/"
  cp deploy/healthcheck.py "$ctx/src/deploy/"
  cp deploy/pip_install.sh "$ctx/"
  dependencies > "$ctx/deps.txt"
  find "$ctx/src" \( -name __pycache__ -o -name '*.egg-info' -o -name '*.nbi' -o -name '*.nbc' \) -prune \
    -exec rm -rf {} +
  if [ "$SOURCE" = wheelhouse ] || [ "$GPU" = 0 ]; then
    cp "$WHEELHOUSE"/*.whl "$ctx/wheelhouse/" 2>/dev/null || true
    if [ "$SOURCE" = index ]; then find "$ctx/wheelhouse" -type f ! -name 'torch-*.whl' -delete; fi
  fi
  local cert=${PIP_CERT:-$("$PY" -m pip config get global.cert 2>/dev/null || true)}
  if [ "$SOURCE" = index ] && [ -f "$cert" ]; then cp "$cert" "$ctx/ca.crt"; else : > "$ctx/ca.crt"; fi
  cp deploy/Dockerfile "$ctx/Dockerfile"
}

docker info >/dev/null 2>&1 || { echo "no Docker daemon answers: run scripts/docker_setup.sh" >&2; exit 1; }
docker image inspect "$BASE" >/dev/null 2>&1 || make_base
if [ "$SOURCE" = wheelhouse ]; then fill_wheelhouse; fi

CTX=$(mktemp -d /tmp/phylorl-context.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
make_context "$CTX"
say "docker build $TAG (source $SOURCE, $(du -sh "$CTX" | cut -f1) context)"
network=none
[ "$SOURCE" = index ] && network=host
build_args=(--network "$network" --build-arg BASE="$BASE" --build-arg PIP_SOURCE="$SOURCE"
            --build-arg TORCH_SPEC="$TORCH_SPEC" --build-arg TORCH_INDEX_URL="$TORCH_INDEX_URL")
# The dependency stage gets a tag of its own (NAME-deps:TAG), so that `docker image prune` cannot remove the
# expensive layers that later builds reuse.
docker build "${build_args[@]}" --target deps --tag "${TAG%%:*}-deps:${TAG#*:}" "$CTX"
docker build "${build_args[@]}" --tag "$TAG" "$CTX"
say "done: $TAG, $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
