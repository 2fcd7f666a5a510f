#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md ("On the GPU") in one run on a CUDA machine (about 11 minutes on an H100):
# the GPU tests, the fused head's kernel settings, the learner update (CUDA graphs, TF32, the fused head), sampled
# records to the GPU (compact moves expanded there), the inference endpoint's batching gain and the whole system
# with the GPU options. JSON lines and logs go to OUT_DIR.
#
#   bash benchmarks/gpu_suite.sh [OUT_DIR] [ACTORS]      (defaults: ./gpu-results, nproc - 2 actors)
#
# Each step has its own time limit and the suite goes on after a failure, so one broken step costs only its
# own figure; the step's exit status is printed with its name.
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-results}
ACTORS=${2:-$(( $(nproc) - 2 ))}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() {  # step NAME LIMIT_S OUTPUT_FILE COMMAND...
  local name=$1 limit=$2 out=$3; shift 3
  echo "== $name (at $(( $(date +%s) - T0 )) s)"
  timeout "$limit" "$@" > "$OUT_DIR/$out" 2> "$OUT_DIR/$out.err"
  echo "   $name: exit $?"
  tail -c 600 "$OUT_DIR/$out"; echo
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step gpu-tests 240 gpu_tests.log python3 -m pytest -q -p no:cacheprovider tests/gpu
step fused-head 120 bench_fused_head.jsonl python3 benchmarks/bench_fused_head.py --tf32 --repeats 20 \
  --blocks 64x64x8,32x64x4,128x64x8,64x128x8
step update 180 bench_update.jsonl python3 benchmarks/bench_update.py --device cuda \
  --paths graphs,graphs-fused --repeats 30 --warmup 5 --tf32
step update-labelled 180 bench_update_labelled.jsonl python3 benchmarks/bench_update.py --device cuda \
  --paths graphs,graphs-fused --repeats 30 --warmup 5 --tf32 --labelled 1.0
step replay 300 bench_replay.jsonl python3 benchmarks/bench_replay.py --repeats 3 --batches 20 --clients 1
step inference 300 bench_inference.jsonl python3 benchmarks/bench_inference.py --seconds 4 --fused-head --tf32
step system 300 bench_system.jsonl python3 benchmarks/bench_system.py --actors "$ACTORS" --envs-per-actor 2 \
  --seconds 45 --warmup-s 60 --device cuda --cuda-graphs --fused-head --tf32
echo "== done at $(( $(date +%s) - T0 )) s; results in $OUT_DIR"
