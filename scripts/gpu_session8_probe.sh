#!/usr/bin/env bash
# Session 8's first, short device call on a 4-GPU host: where does an optimize run's time go, and what
# stops the held-out kernels that session 7 never reached?
#   GPU 0, 1: `ktx optimize --planner rules --shapes default --budget B` under cProfile on two real-code
#             kernels (ggml diag_mask_inf_f32, flashinfer RMSNormKernel); the profiles come back
#   GPUs 2-3: the held-out split of the real-code benchmark at the same budget
#   OUT=/path bash scripts/gpu_session8_probe.sh [PER_KERNEL_S] [LIMIT_S]
# Carry .whl (with libclang) and benchmarks/realcode/src.
set -uo pipefail
cd "$(dirname "$0")/.."
PER="${1:-40}"; LIMIT="${2:-420}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_probe_out}"; mkdir -p "$OUT/prof" "$OUT/realcode"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/device.txt"
prof() {  # GPU ID
  local gpu=$1 id=$2 w=/tmp/probe/$2
  mkdir -p "$w"
  ( cd "benchmarks/realcode/$id" && CUDA_VISIBLE_DEVICES=$gpu /usr/bin/time -v python3 -m cProfile -o "$OUT/prof/$id.prof" \
      -m ktx optimize . --planner rules --shapes default --budget "$PER" --out "$w/optimize" ) >"$OUT/prof/$id.log" 2>&1
  cp "$w/optimize/optimize.json" "$w/optimize/log.jsonl" "$OUT/prof/" 2>/dev/null
  mv "$OUT/prof/optimize.json" "$OUT/prof/$id.optimize.json" 2>/dev/null; mv "$OUT/prof/log.jsonl" "$OUT/prof/$id.log.jsonl" 2>/dev/null
}
prof 0 ggml__diag_mask_inf_f32 & p0=$!
prof 1 flashinfer__RMSNormKernel & p1=$!
LEFT=$(( LIMIT - ($(date +%s) - START) ))
CUDA_VISIBLE_DEVICES=2,3 timeout "$LEFT" python3 benchmarks/realcode/run.py --split heldout --budget "$PER" \
  --deadline $(( LEFT - PER - 60 )) --out "$OUT/realcode" --work /tmp/realcode-work >"$OUT/lane_heldout.txt" 2>&1 & p2=$!
wait $p0 $p1
( CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/measure/test_struct_args_gpu.py ) >"$OUT/struct_tests.txt" 2>&1
wait $p2
python3 - "$OUT/prof" <<'PY'
import pstats, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.prof")):
    print("=====", p.name)
    s = pstats.Stats(str(p)); s.sort_stats("cumulative").print_stats(45)
PY
tail -5 "$OUT/struct_tests.txt"; cat "$OUT/realcode/results.md" 2>/dev/null | head -40
tar czf "$OUT/work.tar.gz" -C /tmp realcode-work probe 2>/dev/null
