#!/usr/bin/env bash
# One device lease's checks, run on the lent GPU machine in the repo root (the device tool's `run`), with the
# .whl/ and .devbin/ that scripts/device_prepare.sh made here carried along:
#
#   LIMIT=550 [STEPS=gpu-tests,system,...] [SPY=1] [ACTORS=14] bash benchmarks/device_lease.sh
#
# It installs the wheels (into /tmp/site) and puts .devbin's redis-server on PATH, names the machine, then runs
# benchmarks/gpu_suite.sh's STEPS (default: the GPU tests first, then the whole system, the endpoint's batching
# gain, the update alone) inside LIMIT seconds in all, and leaves
# every JSON line and log in $OUT/results.tgz. The first test compiles numba's kernels (a minute or two on a fresh
# machine): the suite's step limits allow for it.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-550}
OUT=${OUT:-/tmp/device-out}
RESULTS=/tmp/device-results
mkdir -p "$OUT" "$RESULTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "device_lease.sh: installing .whl/ failed (run scripts/device_prepare.sh here and carry .whl)"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PATH=$PWD/.devbin/bin:/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
command -v redis-server >/dev/null || { echo "device_lease.sh: no redis-server (carry .devbin)"; exit 1; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E '^(Model name|CPU\(s\)):'
  python3 -c 'import torch, triton, grpc, google.protobuf as pb; print("torch", torch.__version__, "triton",
triton.__version__, "grpcio", grpc.__version__, "protobuf", pb.__version__)'
  git log --oneline -1 2>/dev/null || true
} | tee "$RESULTS/machine.txt"
LEFT=$(( LIMIT - ($(date +%s) - T0) - 20 ))
SUITE_SECONDS=$LEFT STEPS=${STEPS:-gpu-tests,system,inference,update} \
  bash benchmarks/gpu_suite.sh "$RESULTS" "${ACTORS:-14}"
tar czf "$OUT/results.tgz" -C "$RESULTS" .
echo "device_lease.sh: done in $(( $(date +%s) - T0 )) s; results in \$OUT/results.tgz"
