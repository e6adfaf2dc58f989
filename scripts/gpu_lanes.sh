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
#   C  whatever STEPS names (reruns): STEPS="0:tune-merge 1:sol" (lane:step ...)
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

# step LANE NAME: one unit of work on GPU LANE, output under $WORK/LANE/NAME
step() {
  local lane=$1 name=$2 dir="$WORK/lane$1/$2"
  mkdir -p "$dir"
  local t0; t0=$(date +%s)
  echo "[$(( t0 - START ))s] gpu$lane: $name (left $(left) s)"
  local rc=0
  case "$name" in
    tune-silu|tune-rmsnorm|tune-merge|exhaustive|throughput)
      CUDA_VISIBLE_DEVICES=$lane OUT="$dir" RUNS="$dir/runs" KTX_SKIP_ENV=1 \
        bash scripts/gpu_tune.sh "$name" >"$dir/stdout.txt" 2>&1 || rc=$? ;;
    gpu-tests)
      CUDA_VISIBLE_DEVICES=$lane KTX_SEMANTIC_JSON="$dir/verify.jsonl" KTX_CACHE_DIR="$dir/cache" \
        timeout "$(left)" python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 --junitxml="$dir/junit.xml" \
        tests/ >"$dir/stdout.txt" 2>&1 || rc=$? ;;
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
    sol|tune|gains)
      CUDA_VISIBLE_DEVICES=$lane OUT="$dir" KTX_CACHE_DIR="$WORK/lane$lane/semantic-cache" RUNS="$dir/runs" \
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
  C)
    for item in ${STEPS:?STEPS=\"lane:step ...\"}; do
      l=${item%%:*}; s=${item#*:}
      eval "C_$l=\"\${C_$l:-} $s\""
    done
    for l in 0 1 2 3; do
      v="C_$l"; [ -n "${!v:-}" ] && lane "$l" ${!v} &
    done
    ;;
  *) echo "plan A, B or C" >&2; exit 2 ;;
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
