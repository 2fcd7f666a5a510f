#!/usr/bin/env bash
# Make the secrets of the compose and swarm stacks (deploy/docker-compose.yml, deploy/docker-stack.yml):
# a CA and the services' TLS certificate (valid for replay, learner, localhost, 127.0.0.1), the shared gRPC
# token, and the Redis ACL file with the password of its one user. Existing files are replaced.
#
#   scripts/make_secrets.sh [DIR]      # default deploy/secrets (the stacks' default; else set PHYLORL_SECRETS=DIR)
#
# The files are mode 0600 and, when run as root, owned by uid/gid 10001: the containers' user, which reads
# them through compose's bind-mounted secrets. Without root they stay yours (run it with sudo for compose).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-deploy/secrets}
OWNER=()
[ "$(id -u)" = 0 ] && OWNER=(--owner 10001)
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m services.launcher.credentials "$DIR" \
  --hosts localhost,127.0.0.1,replay,learner "${OWNER[@]}"
