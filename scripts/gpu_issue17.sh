#!/usr/bin/env bash
# Issue 17's GPU evidence, in one device call on a 4-GPU host (at most 10 minutes):
# the llm.c ladder after the facts layer, laid out like the baseline it is compared with
# (H200, 2026-11-26: encoder and softmax with 500 s, the rest --budget 470 --gpus 3).
#
#   OUT=/path bash scripts/gpu_issue17.sh [BUDGET_SECONDS]
#
# GPUs 0,1: encoder_forward and softmax_forward, one per GPU, each with the whole budget.
# GPUs 2,3: gelu, residual, layernorm and fused_residual, two lanes sharing the budget by weight.
# Hand-written versions are benched in the same run (ktx/hand compares like with like).
# Both ladders write results.json/.md under $OUT/ladder-a and $OUT/ladder-b; stdout ends
# with both tables. Needs shared/llmc (a copy of ../shared/llmc) and .whl carried.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-480}"
OUT="${OUT:-$PWD/gpu_issue17_out}"
mkdir -p "$OUT/ladder-a" "$OUT/ladder-b"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.log" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$OUT/device.txt"
git log -1 --format='%H %s' 2>/dev/null | cut -c1-120 | tee -a "$OUT/device.txt"

CUDA_VISIBLE_DEVICES=0,1 python3 benchmarks/llmc/run.py --llmc shared/llmc --budget "$BUDGET" --gpus 2 \
  --kernels encoder_forward softmax_forward --out "$OUT/ladder-a" >"$OUT/ladder-a.log" 2>&1 &
a=$!
CUDA_VISIBLE_DEVICES=2,3 python3 benchmarks/llmc/run.py --llmc shared/llmc --budget "$BUDGET" --gpus 2 \
  --kernels gelu_forward residual_forward layernorm_forward fused_residual_forward \
  --out "$OUT/ladder-b" >"$OUT/ladder-b.log" 2>&1 &
b=$!
wait $a; ra=$?
wait $b; rb=$?
echo "ladder-a rc=$ra ladder-b rc=$rb"
cat "$OUT/ladder-a/results.md" "$OUT/ladder-b/results.md" 2>/dev/null
# at most 8 files come back: 3 per ladder (results.json, results.md, llmc-runs.tar.gz), device.txt
# and the logs packed into one tarball
tar czf "$OUT/logs.tar.gz" -C "$OUT" env.log ladder-a.log ladder-b.log && rm -f "$OUT"/*.log
exit $(( ra || rb ))
