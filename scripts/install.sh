#!/usr/bin/env bash
# Install everything phylorl needs on a fresh Debian machine (run as root): system packages
# (redis-server, IQ-TREE 2, Prometheus), the CPU build of PyTorch, then phylorl itself (editable).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v iqtree2 >/dev/null || missing+=(iqtree)
command -v prometheus >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  echo "[install] apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
# torch first, pinned: an open range would pull a multi-GB CUDA build.
"$PY" -c 'import torch' 2>/dev/null || "$PY" -m pip install -q torch==2.13.0
"$PY" -m pip install -q -e '.[dev]'
command -v pyenv >/dev/null && pyenv rehash || true
# numba compiles each kernel on its first use: compile every one a first command uses (search, polish, eval, the
# environment, the learner's and replay's record passes) once here, about three minutes on a 2-core VM, so no
# command stalls on it (the cache lives in ~/.cache/phylorl/numba/<digest of the source>, see phylorl/jit_cache.py;
# NUMBA_CACHE_DIR overrides it).
"$PY" scripts/compile_kernels.py
echo "[install] done: $("$PY" -c 'import phylorl, torch; print("phylorl", phylorl.__version__, "torch", torch.__version__)')"
