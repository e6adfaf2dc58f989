#!/usr/bin/env bash
# Several GPU evidence jobs side by side on a multi-GPU host, one lane per GPU, inside one device
# command (at most 10 minutes). A multi-GPU lease counts its held time once, so four lanes cost what
# one does. Each lane runs its steps in order, pinned to its GPU with CUDA_VISIBLE_DEVICES, writing
# under $WORK/<lane>/; at the end everything is packed into $OUT/<plan>.tar.gz (the device tool
# brings back at most 8 files) and a short table goes to stdout and $OUT/<plan>.txt.
#
#   OUT=/path bash scripts/gpu_lanes.sh A|B|C [BUDGET_SECONDS]
#
# Plans (budget default 560 s; every step is capped to end before it):
#   A  issue 7 and issue 5's checks:
#        gpu0: ktx tune silu_and_mul (default shapes)
#        gpu1: ktx tune fused_add_rmsnorm, then merge_attn_states (default shapes)
#        gpu2: the exhaustive silu_and_mul space (recording), then the throughput benchmark
#        gpu3: every gpu-marked test (the semantic passes' full verification included)
#   B  issue 5's tuning and issue 6:
#        gpu0-2: ktx optimize (rules) on every suite kernel, seeds 0 and 1
#        gpu3: the Nsight Compute check, then the scalar baselines' SoL and tune, then the gains
#   C  reruns after A and B (see the plan below); merge's run folder from A is carried in .gpu_carry
set -uo pipefail
cd "$(dirname "$0")/.."
PLAN="${1:?plan A, B or C}"
BUDGET="${2:-560}"
START=$(date +%s)
export DEADLINE=$(( START + BUDGET - 25 ))  # 25 s to pack
OUT="${OUT:-$PWD/gpu_lanes_out}"
WORK="${WORK:-/tmp/ktx-lanes}"
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 JOBS="${JOBS:-12}"
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$WORK/env.log" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$WORK/device.txt"
python3 -c "import cupy, optuna; print('cupy', cupy.__version__, 'optuna', optuna.__version__)" | tee -a "$WORK/device.txt"
left() { echo $(( DEADLINE - $(date +%s) )); }

# step LANE NAME[:ARG]: one unit of work on GPU LANE, output under $WORK/laneLANE/NAME[_ARG]
step() {
  local lane=$1 name=${2%%:*} arg=""
  [ "$2" != "$name" ] && arg=${2#*:}
  local tag; tag=$(basename "${arg:-x}")
  local dir="$WORK/lane$1/$name${arg:+_$tag}"
  mkdir -p "$dir"
  local t0; t0=$(date +%s)
  echo "[$(( t0 - START ))s] gpu$lane: $name (left $(left) s)"
  local rc=0
  case "$name" in
    tune-silu|tune-rmsnorm|tune-merge|exhaustive|throughput)  # ARG: a run folder to resume
      CUDA_VISIBLE_DEVICES=$lane OUT="$dir" RUNS="$dir/runs" KTX_SKIP_ENV=1 RESUME_FROM="$arg" \
        bash scripts/gpu_tune.sh "$name" >"$dir/stdout.txt" 2>&1 || rc=$? ;;
    gpu-tests)
      CUDA_VISIBLE_DEVICES=$lane KTX_SEMANTIC_JSON="$dir/verify.jsonl" KTX_CACHE_DIR="$dir/cache" \
        timeout "$(left)" python3 -m pytest -v -m gpu -p no:cacheprovider -n 4 --durations=15 \
        --junitxml="$dir/junit.xml" ${GPU_TESTS:-tests/} >"$dir/stdout.txt" 2>&1 || rc=$? ;;
    ncu)
      CUDA_VISIBLE_DEVICES=$lane timeout "$(left)" python3 - "$dir/ncu.json" >"$dir/stdout.txt" 2>&1 <<'PY' || rc=$?
import json, sys
from pathlib import Path
sys.path.insert(0, "scripts")
from gpu_optimize import ncu_check
Path(sys.argv[1]).write_text(json.dumps(ncu_check(Path.cwd(), "silu_and_mul", 80.0), indent=1) + "\n")
print(Path(sys.argv[1]).read_text())
PY
      ;;
    sol|tune|gains)  # ARG: kernels, '+'-separated
      CUDA_VISIBLE_DEVICES=$lane OUT="$dir" KTX_SEM_KERNELS="${arg//+/ }" KTX_CACHE_DIR="$WORK/lane$lane/semantic-cache" RUNS="$dir/runs" \
        timeout "$(left)" bash scripts/gpu_semantic.sh "$name" >"$dir/stdout.txt" 2>&1 || rc=$? ;;
    optimize)
      OUT="$dir" WORK="$dir/work" GPUS="${OPT_GPUS:-3}" NCU_CHECK=0 \
        timeout "$(left)" bash scripts/gpu_optimize.sh "$(( $(left) - 5 ))" >"$dir/stdout.txt" 2>&1 || rc=$? ;;
    *) echo "unknown step $name" >"$dir/stdout.txt"; rc=2 ;;
  esac
  echo "[$(( $(date +%s) - START ))s] gpu$lane: $name done rc=$rc ($(( $(date +%s) - t0 )) s)"
  echo "$rc" >"$dir/rc"
}

lane() {  # LANE STEP...
  local n=$1; shift
  for s in "$@"; do
    [ "$(left)" -gt 30 ] || { echo "gpu$n: no time left for $s"; continue; }
    step "$n" "$s"
  done
}

case "$PLAN" in
  A)
    SECONDS_SILU="${SECONDS_SILU:-330}" lane 0 tune-silu &
    SECONDS_RMSNORM="${SECONDS_RMSNORM:-200}" SECONDS_MERGE="${SECONDS_MERGE:-150}" lane 1 tune-rmsnorm tune-merge &
    THROUGHPUT_N="${THROUGHPUT_N:-40}" lane 2 exhaustive throughput &
    lane 3 gpu-tests &
    ;;
  B)
    lane 0 optimize &
    lane 3 ncu sol tune gains &
    ;;
  C)  # the reruns after A and B: merge's tune resumed from A's study, the scalar baselines'
      # SoL and the semantic gains (one verification round at the shape and each odd variant),
      # and the gpu tests that A's time limit cut
    export KTX_SEM_ROUNDS="${KTX_SEM_ROUNDS:-1}" KTX_SEM_ODD_ROUNDS="${KTX_SEM_ODD_ROUNDS:-1}"
    SECONDS_MERGE="${SECONDS_MERGE:-200}" lane 0 "tune-merge:${MERGE_RUN:-$PWD/.gpu_carry/tune_merge_attn_states}" &
    lane 1 sol:act_and_mul_scalar gains:silu_and_mul &
    lane 2 sol:moe_sum_scalar gains:fused_add_rmsnorm+merge_attn_states &
    GPU_TESTS="${GPU_TESTS:-tests/kernels tests/measure tests/search tests/agent tests/passes/test_semantic_gpu.py::test_every_config_verifies[cache-hints:tree_sum]}" \
      lane 3 gpu-tests &
    ;;
  D)  # after the worker's memo of inputs and references: throughput again, fused_add_rmsnorm's
      # tune again (A's left its largest shapes unevaluated), ktx tune on the scalar baselines
    THROUGHPUT_N="${THROUGHPUT_N:-40}" lane 0 throughput &
    SECONDS_RMSNORM="${SECONDS_RMSNORM:-180}" lane 1 tune-rmsnorm &
    export KTX_SEM_TUNE_SECONDS="${KTX_SEM_TUNE_SECONDS:-200}"
    KTX_SEM_TUNE_TRIALS="${KTX_SEM_TUNE_TRIALS:-30}" lane 2 tune:act_and_mul_scalar &
    KTX_SEM_TUNE_TRIALS="${KTX_SEM_TUNE_TRIALS:-30}" lane 3 tune:moe_sum_scalar &
    ;;
  *) echo "plan A, B, C or D" >&2; exit 2 ;;
esac
wait

# pack: everything but compile caches, Optuna run folders' cubins, and pytest caches
tar czf "$OUT/$PLAN.tar.gz" -C "$WORK" --exclude='cache' --exclude='cubins*' --exclude='semantic-cache' \
  --exclude='__pycache__' . 2>/dev/null
{
  cat "$WORK/device.txt"
  for d in "$WORK"/lane*/*/; do
    echo "== ${d#"$WORK"/} rc=$(cat "$d/rc" 2>/dev/null || echo '?')"
    tail -n 25 "$d/stdout.txt" 2>/dev/null
  done
} >"$OUT/$PLAN.txt"
cat "$OUT/$PLAN.txt"
ls -la "$OUT"
