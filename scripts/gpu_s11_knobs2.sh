#!/usr/bin/env bash
# Session 11 wave 2, branch s11-knobs2 (issue 22 item 3 follow-ups):
#   1. DeepSpeed pre_rms_norm on `expose,block-size`: UNROLL's coverage constraint now follows
#      BLOCK_X (it was fixed at the spec's 256 threads), so (BLOCK_X=512, UNROLL=1), (1024, 1),
#      and below 256 (128, 4), (64, 8) at 4096 columns are in the space. A grid over UNROLL x BLOCK_X
#      (6 x 7, the constraint-feasible ones; the time limit may cut it) per shape,
#      every config verified against the original. What to look for: 0 verification failures;
#      whether (512|1024, 1) beats the pick (0, 0) at elems_per_row 4096, and (512, 2) at 8192.
#   2. exllamav2 head_norm on `expose`: MAX_WARPS is kept >= ceil(head_dim / 2 / 32) (the warps
#      the launch writes partials for); every admitted value verified (0 failures expected; before,
#      MAX_WARPS=1 at head_dim 128 wrote sums[1] past the array).
#   OUT=/path bash scripts/gpu_s11_knobs2.sh [LIMIT_S=230]     (one GPU, under 4 minutes)
# Carry .whl and benchmarks/realcode/src (fetch.py writes it).
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT="${1:-230}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_s11_knobs2_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | head -1
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
WORK=/tmp/s11-knobs2-work; rm -rf "$WORK"; mkdir -p "$WORK"
run_one() {  # id passes trials seconds
  local id=$1 passes=$2 trials=$3 secs=$4
  python3 - "$id" "$passes" >"$OUT/space_$id.json" 2>&1 <<'PY'
import json, os, sys
from ktx.pipeline import template_for_spec
from ktx.specload import load_spec
os.chdir(f"benchmarks/realcode/{sys.argv[1]}")
t = template_for_spec(load_spec("ktx.toml"), sys.argv[2])
print(json.dumps({"knobs": [k.to_json() for k in t.knobs], "constraints": list(t.space.constraints)}, indent=1))
PY
  local left=$(( LIMIT - ($(date +%s) - START) - 5 ))
  [ "$secs" -gt "$left" ] && secs=$left
  if [ "$secs" -lt 15 ]; then echo "tune $id: not run ($left s left)" | tee -a "$OUT/tune.txt"; return; fi
  (cd "benchmarks/realcode/$id" && CUDA_VISIBLE_DEVICES=0 timeout $(( secs + 20 )) python3 -m ktx tune . \
     --passes "$passes" --shapes default --sampler grid --trials "$trials" --time-limit "$secs" --quiet \
     --out "$WORK/tune_$id" >"$OUT/tune_$id.log" 2>&1; echo "tune $id rc=$? ($passes, $secs s)" | tee -a "$OUT/tune.txt")
  grep -hiE "verif|dispatch|UNROLL|BLOCK_X|MAX_WARPS|speedup|fail" "$OUT/tune_$id.log" | head -30
}
run_one deepspeed__pre_rms_norm expose,block-size 42 160
run_one exllamav2__head_norm_kernel expose 5 50
tar czf "$OUT/work.tar.gz" --exclude='*.o' --exclude='*.cubin' -C /tmp s11-knobs2-work 2>/dev/null
echo "elapsed $(( $(date +%s) - START )) s" | tee -a "$OUT/device.txt"
