#!/usr/bin/env bash
# Regenerate the protobuf and gRPC modules of phylorl/wire/v1 from protos/phylorl/wire/v1/*.proto, or write
# them under another root: bash scripts/gen_protos.sh [ROOT] (ROOT/phylorl/wire/v1; default: the repository).
# The proto files lie at the path their modules import from, so protoc's output needs no rewriting.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo}"
mkdir -p "$out/phylorl/wire/v1"
python3 -m grpc_tools.protoc -I"$repo/protos" --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  "$repo"/protos/phylorl/wire/v1/*.proto
