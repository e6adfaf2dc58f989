#!/usr/bin/env bash
# Session 10, branch s10-init: the three ggml specs whose text this branch changed, run end to end
# on one GPU, so that writing the header's block size as a [vars] entry (CUDA_GET_ROWS_BLOCK_SIZE,
# CUDA_CPY_BLOCK_SIZE, CUDA_QUANTIZE_BLOCK_SIZE, and the grids through it) instead of the number
# changed no result: the original still benches, and the block-size pass still tunes the launch
# (compare with session 9's rows for the same kernels). Nothing else this branch changed runs on a
# GPU: the rest is `ktx init`'s draft, measured on the CPU (benchmarks/realcode/cpu_table.md).
#   OUT=/path bash scripts/gpu_s10_init.sh [PER_KERNEL_S] [LIMIT_S]   (one GPU: about 3 minutes)
# Carry .whl and benchmarks/realcode/src (fetch.py writes it).
set -uo pipefail
cd "$(dirname "$0")/.."
PER="${1:-30}"; LIMIT="${2:-210}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_s10_init_out}"; mkdir -p "$OUT/realcode"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/device.txt"
IDS=(ggml__k_get_rows_float ggml__cpy_scalar ggml__quantize_q8_1)
for id in "${IDS[@]}"; do
  (cd "benchmarks/realcode/$id" && python3 -m ktx init --check . >"$OUT/check_$id.txt" 2>&1; echo "rc=$?" >>"$OUT/check_$id.txt")
done
LEFT=$(( LIMIT - ($(date +%s) - START) ))
timeout "$LEFT" python3 benchmarks/realcode/run.py --ids "${IDS[@]}" --budget "$PER" \
  --deadline $(( LEFT - PER - 40 )) --out "$OUT/realcode" --work /tmp/s10-init-work >"$OUT/lanes.txt" 2>&1
cat "$OUT/realcode/results.md" 2>/dev/null | head -40
tar czf "$OUT/work.tar.gz" -C /tmp s10-init-work 2>/dev/null
