#!/usr/bin/env bash
# Issue 22 item 3's GPU evidence: the template block size a launcher picks by shape, searched per
# shape (benchmarks/template_norm, a llama.cpp-like LayerNorm whose launcher picks
# ncols < 1024 ? 32 : 1024). One H100/H200, one device command of under 8 minutes:
#
#   1. bs      ktx tune --passes block-size over the default shapes (4096 columns at 1, 32, 512
#              and 4096 rows; 768 columns at 512 rows), grid over BLOCK_X's 7 values (0 is the
#              launcher's own pick, the original): per shape the best block size and its speedup
#              over the original, which the dispatch table never undercuts. The hand sweep of the
#              issue (H200, CUDA graph) had 512 threads faster than 1024 by 1.11x, 1.09x, 1.24x
#              and 1.37x at 1, 32, 512 and 4096 rows;
#   2. bsvec   ktx tune --passes block-size,vectorize (BLOCK_X x VEC_L2), the same shapes;
#   3. build   the slow nvcc build test of every BLOCK_X and sampled chain configs.
#
# Output in $OUT: tknobs.log, tune_bs.json and tune_bsvec.json (summary, dispatch table, best
# configs of each run).
# Usage on the GPU host, repo root, wheels carried as scripts/gpu_env.sh expects:
#   OUT=/path bash scripts/gpu_tknobs.sh
# CPU dry run: KTX_SKIP_ENV=1 PY=.venv/bin/python BACKEND=harness:tests/measure/fake_gpu.py:handle OUT=/tmp/o bash scripts/gpu_tknobs.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_tknobs_out}"
RUNS="${RUNS:-/tmp/ktx-tknobs-runs}"
mkdir -p "$OUT" "$RUNS"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
PY="${PY:-python3}"
BACKEND="${BACKEND:-cupy}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$RUNS/cubins"
KERNEL=benchmarks/template_norm
LOG="$OUT/tknobs.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

bundle() {  # bundle RUN_DIR OUT_JSON: the run's outputs in one JSON file
  "$PY" - "$@" <<'PY'
import json, sys
from pathlib import Path
run, out = Path(sys.argv[1]), Path(sys.argv[2])
data = {}
for name in ("summary.json", "dispatch.json", "best.json", "holdout.json"):
    p = run / name
    data[name] = json.loads(p.read_text()) if p.exists() else None
out.write_text(json.dumps(data, indent=1))
PY
}

tune() {  # tune NAME PIPELINE TRIALS SECONDS
  local name=$1 pipeline=$2 trials=$3 seconds=$4 run="$RUNS/$1"
  rm -rf "$run"
  say "$name: ktx tune --passes $pipeline (trials $trials, $seconds s)"
  "$PY" -m ktx tune "$KERNEL" --passes "$pipeline" --shapes default --sampler grid --trials "$trials" \
    --time-limit "$seconds" --backend "$BACKEND" --out "$run" >>"$LOG" 2>&1
  say "$name: exit $?"
  bundle "$run" "$OUT/tune_$name.json"
}

tune bs block-size 7 150
tune bsvec block-size,vectorize 21 200
say "build: slow nvcc test"
"$PY" -m pytest -q tests/passes/test_template_knobs_build.py -p no:randomly >>"$LOG" 2>&1
say "build: exit $?"
