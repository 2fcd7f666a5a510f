#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md ("On the GPU") in one run on a CUDA machine. In order: `tests/gpu` (first,
# the endpoint's graphs first of them: the figures after them mean little if the GPU paths are wrong; numba compiles
# its kernels on a machine whose cache is cold), the whole system with the GPU options (graphs: the update's and the
# endpoint's), the inference endpoint's batching gain, the learner update (CUDA graphs, TF32, the fused head), sampled
# records to the GPU (compact moves expanded there), the update with demonstration labels on every next state, the
# fused head alone, and acting alone with the actors' pipeline off and on. JSON lines and logs go to OUT_DIR.
#
#   [ENVS=8] [PIPELINE=0] [SPY=1] bash benchmarks/gpu_suite.sh [OUT_DIR] [ACTORS]
#   (defaults: ./gpu-results, nproc - 2 actors)
#
# Each step runs under its own time limit and the suite goes on after a failure, so one broken step costs only
# its own figure; the step's exit status is printed with its name. SUITE_SECONDS (environment) caps the whole run:
# a step is given at most what is left of it, and one that would get under 20 s is skipped (for a device lease of
# fixed length). STEPS (environment, comma-separated step names, e.g. `gpu-tests,system,update`) runs only those
# steps, in the suite's order; unset or `all` runs every step.
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-results}
ACTORS=${2:-$(( $(nproc) - 2 ))}
# environments per actor: each actor sends its environments' states in one request per pipeline group and step, so
# more of them hide the inference round trip
ENVS=${ENVS:-8}
# groups each actor steps while another group's request is out (ActorConfig.pipeline; 0: the actor's default)
PIPELINE=${PIPELINE:-0}
SUITE_SECONDS=${SUITE_SECONDS:-100000}
STEPS=${STEPS:-all}
KNOWN=" gpu-tests system inference update replay update-labelled fused-head acting-pipeline-1 \
acting-pipeline-2 "
if [[ $STEPS != all ]]; then
  for s in ${STEPS//,/ }; do
    [[ $KNOWN == *" $s "* ]] || { echo "gpu_suite.sh: unknown step '$s' in STEPS (steps:$KNOWN)" >&2; exit 2; }
  done
fi
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() {  # step NAME LIMIT_S OUTPUT_FILE COMMAND...
  local name=$1 limit=$2 out=$3; shift 3
  if [[ $STEPS != all && ,$STEPS, != *,$name,* ]]; then return; fi
  local left=$(( SUITE_SECONDS - ($(date +%s) - T0) - 5 ))
  if (( left < 20 )); then echo "== $name: skipped (${left} s left of SUITE_SECONDS)"; return; fi
  (( limit > left )) && limit=$left
  echo "== $name (at $(( $(date +%s) - T0 )) s, limit $limit s)"
  timeout "$limit" "$@" > "$OUT_DIR/$out" 2> "$OUT_DIR/$out.err"
  echo "   $name: exit $? at $(( $(date +%s) - T0 )) s"
  tail -c 600 "$OUT_DIR/$out"; echo
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step gpu-tests 240 gpu_tests.log python3 -m pytest -q -rf -p no:cacheprovider tests/gpu/test_inference_gpu.py \
  tests/gpu
SYSTEM=(python3 benchmarks/bench_system.py --actors "$ACTORS" --envs-per-actor "$ENVS" --seconds 30 --warmup-s 40
        --device cuda --cuda-graphs --fused-head --tf32 --actor-pipeline "$PIPELINE")
[[ ${SPY:-0} == 1 ]] && SYSTEM+=(--py-spy)  # where the learner's threads spend each system run (py-spy on PATH)
step system 170 bench_system.jsonl "${SYSTEM[@]}"
step inference 150 bench_inference.jsonl python3 benchmarks/bench_inference.py --seconds 3 --fused-head --tf32 \
  --cuda-graphs
step update 90 bench_update.jsonl python3 benchmarks/bench_update.py --device cuda \
  --paths graphs,graphs-fused --repeats 30 --warmup 5 --tf32
step replay 60 bench_replay.jsonl python3 benchmarks/bench_replay.py --repeats 2 --batches 10 --clients 1
step update-labelled 90 bench_update_labelled.jsonl python3 benchmarks/bench_update.py --device cuda \
  --paths graphs-fused --repeats 30 --warmup 5 --tf32 --labelled 1.0
step fused-head 60 bench_fused_head.jsonl python3 benchmarks/bench_fused_head.py --tf32 --repeats 20 \
  --blocks 64x64x8,128x64x8
# acting alone (the learner serves inference and never trains): the actors' pipeline against one call per step
for groups in 1 2; do
  step "acting-pipeline-$groups" 100 "bench_acting_p$groups.jsonl" python3 benchmarks/bench_system.py \
    --actors "$ACTORS" --envs-per-actor "$ENVS" --seconds 20 --warmup-s 15 --device cuda --fused-head --tf32 \
    --no-updates --actor-pipeline "$groups"
done
echo "== done at $(( $(date +%s) - T0 )) s; results in $OUT_DIR"
