#!/usr/bin/env bash
# Session 9, s9-tknobs: GPU evidence for the template/constexpr knobs this branch exposes on the
# real-code kernels (issue 22 item 3; benchmarks/realcode/knobcheck.md has the CPU side: every
# sampled candidate built with nvcc). Each run is `ktx tune` with the grid sampler over the one
# pass that exposes the setting, so every value is measured and verified against the original
# (a wrong candidate is recorded as such: that is the evidence that a domain is right or wrong):
#
#   vec      flashinfer RMSNormKernel, expose{names=VEC_SIZE}: VEC_SIZE 2, 4, 8 (the launcher's
#            pick, now a knob no wider than the spec's 8)
#   norm     ggml norm_f32, block-size: BLOCK_X 32 .. 1024 (the launcher picks k<WARP_SIZE> or
#            k<1024> by shape; before, refused)
#   softmax  ggml soft_max_f32, block-size: block_size_template now follows BLOCK_X (before, a
#            block of 256 ran a kernel striding by 1024: every non-default candidate wrong)
#   prerms   deepspeed pre_rms_norm, block-size: BLOCK_X >= 256, threadsPerGroup/maxThreads follow
#   bnb      bitsandbytes kDequantizeBlockwise, expose{names=THREADS|NUM_PER_TH}:
#            THREADS * NUM_PER_TH == 512, the spec's block follows THREADS
#   dsdq     deepspeed dequantize_kernel, expose{names=THREADS|UNROLL}: THREADS * UNROLL == 4096
#   bnbq     bitsandbytes kQuantizeBlockwise, expose{names=NUM_PER_TH}: the block is 4096 // NUM_PER_TH
#
# One H100/H200, under 4 minutes (7 runs, 30 s each). The host has no network: carry
# benchmarks/realcode/src (git-ignored; `python benchmarks/realcode/fetch.py` writes it).
# Output in $OUT: tknobs_s9.log and tune_<name>.json (summary, dispatch table, best configs).
#   OUT=/path bash scripts/gpu_s9_tknobs.sh
# What to read: per run, the valid and wrong counts of summary.json, and the best config per
# shape against the original (BLOCK_X 0 / the spec's value is the original).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s9_tknobs_out}"
RUNS="${RUNS:-/tmp/ktx-s9-tknobs-runs}"
mkdir -p "$OUT" "$RUNS"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
PY="${PY:-python3}"
BACKEND="${BACKEND:-cupy}"
SECONDS_EACH="${SECONDS_EACH:-30}"
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="$RUNS/cubins"
LOG="$OUT/tknobs_s9.log"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

bundle() {  # bundle RUN_DIR OUT_JSON
  "$PY" - "$@" <<'PY'
import json, sys
from pathlib import Path
run, out = Path(sys.argv[1]), Path(sys.argv[2])
data = {}
for name in ("summary.json", "dispatch.json", "best.json"):
    p = run / name
    data[name] = json.loads(p.read_text()) if p.exists() else None
out.write_text(json.dumps(data, indent=1))
PY
}

tune() {  # tune NAME KERNEL_DIR PIPELINE TRIALS SHAPES
  local name=$1 dir=benchmarks/realcode/$2 pipeline=$3 trials=$4 shapes=$5 run="$RUNS/$1"
  rm -rf "$run"
  say "$name: ktx tune $dir --passes $pipeline --shapes $shapes (grid, $trials trials, $SECONDS_EACH s)"
  "$PY" -m ktx tune "$dir" --passes "$pipeline" --shapes "$shapes" --sampler grid --trials "$trials" \
    --time-limit "$SECONDS_EACH" --backend "$BACKEND" --out "$run" >>"$LOG" 2>&1
  say "$name: exit $?"
  bundle "$run" "$OUT/tune_$name.json"
}

tune vec flashinfer__RMSNormKernel "expose{names=VEC_SIZE}" 3 quick
tune norm ggml__norm_f32 block-size 6 default
tune softmax ggml__soft_max_f32 block-size 7 quick
tune prerms deepspeed__pre_rms_norm block-size 4 default
tune bnb bitsandbytes__kDequantizeBlockwise "expose{names=THREADS|NUM_PER_TH}" 20 quick
tune dsdq deepspeed__dequantize_kernel "expose{names=THREADS|UNROLL}" 20 default
tune bnbq bitsandbytes__kQuantizeBlockwise "expose{names=NUM_PER_TH}" 5 quick
say "done"
