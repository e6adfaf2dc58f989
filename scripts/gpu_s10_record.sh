#!/usr/bin/env bash
# Held-out exhaustive spaces for the search goal (issue 23): every feasible config of three kernels
# other than act_and_mul_scalar, verified and timed, in the shared recording's format
# (scripts/record_space.py). They are for the lead's final check of `ktx tune`'s default sampler,
# which was not tuned on them; score them on any CPU afterwards with ONE command:
#
#   .venv/bin/python scripts/search_replay.py $OUT/space_*.json --seeds 20 --json $OUT/replay.json
#
# (search_replay.py reads each recording's kernel folder and its complete shapes from the file.)
#
#   OUT=/path bash scripts/gpu_s10_record.sh       (under 4 minutes on one GPU: the needle check
#     ~25 s, then each kernel cut at its LIMIT_* seconds (50 + 55 + 75), keeping its complete shapes;
#     FlashInfer's headers compile ~2.5x slower than the suite's kernels, hence its longer limit)
# Carry .whl and benchmarks/realcode/src (the FlashInfer kernel's sources; without them that
# kernel is skipped and said so).
#
# The spaces (broad shape first, so that a cut still leaves the broad shape whole):
#   rmsnorm            block-size,row-registers,cache-hints{stores=false,helpers=false}
#                      BLOCK_Y 7 x CACHE_LD_INPUT 4 x CACHE_LD_WEIGHT 4 x PACKS 4: 432 / 416 feasible
#                      at tokens=4096,d=4096 / tokens=1,d=8192
#   moe_sum_scalar     vectorize,block-size{min=64},split,unroll{max=4,loops=L0}
#                      VEC_L0 4 x BLOCK_X 6 x SPLIT 6 x UNROLL_L0 4: 576 at both shapes
#   flashinfer RMSNormKernel (real code: template VEC_SIZE and BLOCK_SIZE exposed)
#                      expose,block-size,row-registers,tile{loops=L0}
#                      VEC_SIZE 3 x BLOCK_SIZE 3 x BLOCK_Y 7 x TILE_L0 4: 252 at both shapes
# First a needle check of the shared recording's tokens=16 optimum (below).
# Writes $OUT/space_<kernel>.json, $OUT/record_<kernel>.txt, $OUT/needle_*.{json,txt,md} and
# $OUT/record.log. The replay step must not pick up needle_again.json: it is not a whole space
# (search_replay.py says so: it has no complete shape).
set -u
cd "$(dirname "$0")/.."
START_S=$(date +%s)
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
RUNS="${RUNS:-/tmp/ktx-gpu-runs}"
mkdir -p "$RUNS"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
PY="${PY:-python3}"
BACKEND="${BACKEND:-cupy}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$RUNS/cubins_s10_record"
cores=$(nproc 2>/dev/null || echo 4)
JOBS="${JOBS:-$(( cores > 2 ? cores - 1 : 1 ))}"
LIMIT_RMSNORM="${LIMIT_RMSNORM:-50}"
LIMIT_MOE="${LIMIT_MOE:-55}"
LIMIT_FLASHINFER="${LIMIT_FLASHINFER:-75}"
LOG="$OUT/record.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

TOTAL_S="${TOTAL_S:-220}"  # the whole script's bound: a step gets at most what is left of it
left_s() { echo $(( TOTAL_S - ($(date +%s) - START_S) )); }

record() {  # name kernel_dir passes shapes limit_s
  local name=$1 dir=$2 passes=$3 shapes=$4 limit=$5
  local left; left=$(( $(left_s) - 15 ))  # 15 s for starting and writing
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -lt 15 ]; then say "skipped $name: ${TOTAL_S}s nearly spent"; return; fi
  say "record $name: $dir --passes '$passes' --shapes '$shapes' (limit ${limit}s, $JOBS compile jobs)"
  # the outer timeout only guards against a hang: record_space.py stops itself at --limit-s and
  # writes what it has (the shapes it measured completely are named in stats.exhaustive_shapes)
  timeout --foreground -k 5 $(( limit + 20 )) "$PY" scripts/record_space.py "$dir" --passes "$passes" --shapes "$shapes" \
    --limit-s "$limit" --jobs "$JOBS" --backend "$BACKEND" --save 200 --out "$OUT/space_$name.json" \
    > "$OUT/record_$name.txt" 2>&1
  say "rc=$?"; tail -4 "$OUT/record_$name.txt" | tee -a "$LOG" >&2
}

"$PY" -c "import cupy; print(cupy.cuda.runtime.getDeviceProperties(0)['name'].decode())" > "$OUT/device.txt" 2>&1
say "device: $(cat "$OUT/device.txt")"

# 1. The needle check (about 20 s): is the shared recording's tokens=16 optimum (1.715 µs, every
# sibling differing only in unroll or cache policy ~15% slower) the config or the moment? Its
# 3 best configs, 2 one-knob neighbours of each, and plateau configs
# (results/search_model/needle_configs_act_and_mul_tokens16.json, from `scripts/needle_check.py
# pick` on the shared recording), measured 5 times each in rounds.
say "needle check: act_and_mul_scalar tokens=16, 16 configs x 5 rounds"
timeout --foreground -k 5 60 "$PY" scripts/record_space.py kernels/act_and_mul_scalar \
  --passes 'vectorize,block-size{min=64},split,unroll{max=4,loops=L0},cache-hints{stores=false}' \
  --shapes 'tokens=16,d=4096' --configs @results/search_model/needle_configs_act_and_mul_tokens16.json \
  --repeat 5 --limit-s "${LIMIT_NEEDLE:-40}" --jobs "$JOBS" --backend "$BACKEND" --out "$OUT/needle_again.json" \
  > "$OUT/needle_again.txt" 2>&1
say "rc=$?"
SHARED_RECORDING="${SHARED_RECORDING:-shared/recordings/space_act_and_mul_scalar_h200.json.gz}"
[ -f "$SHARED_RECORDING" ] || SHARED_RECORDING=../shared/recordings/space_act_and_mul_scalar_h200.json.gz
if [ -f "$SHARED_RECORDING" ] && [ -f "$OUT/needle_again.json" ]; then
  "$PY" scripts/needle_check.py report "$SHARED_RECORDING" "$OUT/needle_again.json" tokens=16,d=4096 \
    --json "$OUT/needle_report.json" 2>&1 | tee "$OUT/needle_report.md" | tee -a "$LOG" >&2
else
  say "needle report left for the CPU: scripts/needle_check.py report RECORDING $OUT/needle_again.json tokens=16,d=4096"
fi

# 2. The held-out spaces.
record rmsnorm kernels/rmsnorm 'block-size,row-registers,cache-hints{stores=false,helpers=false}' \
  'tokens=4096,d=4096;tokens=1,d=8192' "$LIMIT_RMSNORM"
record moe_sum_scalar kernels/moe_sum_scalar 'vectorize,block-size{min=64},split,unroll{max=4,loops=L0}' \
  'tokens=4096,d=4096,topk=4;tokens=64,d=7168,topk=8' "$LIMIT_MOE"
if [ -d benchmarks/realcode/src/flashinfer ]; then
  record flashinfer_rmsnorm benchmarks/realcode/flashinfer__RMSNormKernel \
    'expose,block-size,row-registers,tile{loops=L0}' 'batch_size=4096,d=4096;batch_size=1024,d=8192' \
    "$LIMIT_FLASHINFER"
else
  say "skipped flashinfer_rmsnorm: benchmarks/realcode/src/flashinfer is not here (carry benchmarks/realcode/src)"
fi

# What each recording holds (the replay itself runs on a CPU, not here: it costs no GPU time).
"$PY" - "$OUT" <<'PY' | tee -a "$LOG"
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("space_*.json")):
    data = json.loads(path.read_text())
    stats = data.get("stats", {})
    print(path.name, data.get("device"), "measured", stats.get("measured"), "of", stats.get("jobs"),
          "in", stats.get("wall_s"), "s; complete shapes:", stats.get("exhaustive_shapes"),
          "statuses:", stats.get("statuses"))
PY
say "done"
