#!/usr/bin/env bash
# Session 9, branch s9-init: the kernels whose analysis this branch changed, run end to end on the
# GPU, so that the new facts did not break a candidate.
#   ggml quantize_q8_1: a store into a field of a subscripted element (y[ib].qs[iqs] = q) is now
#     a store to y (ir/facts/kinds.py), which every pass reads through ir/access;
#   ggml k_get_rows_float, cpy_scalar, quantize_q8_1: ktx now reads their launch through
#     ggml_cuda_kernel_launch(k, launch_params, ...) (ir/launch.py), so they have a launch site;
#   exllamav2 rms_norm_kernel, ggml rope_norm: drafted differently (not run differently: their
#     specs are unchanged), as controls.
#   OUT=/path bash scripts/gpu_s9_init.sh [PER_KERNEL_S] [LIMIT_S]   (one GPU: about 4 minutes)
# Carry .whl and benchmarks/realcode/src (fetch.py writes it).
set -uo pipefail
cd "$(dirname "$0")/.."
PER="${1:-30}"; LIMIT="${2:-230}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_s9_init_out}"; mkdir -p "$OUT/realcode"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/device.txt"
IDS=(ggml__quantize_q8_1 ggml__k_get_rows_float ggml__cpy_scalar exllamav2__rms_norm_kernel ggml__rope_norm)
LEFT=$(( LIMIT - ($(date +%s) - START) ))
timeout "$LEFT" python3 benchmarks/realcode/run.py --ids "${IDS[@]}" --budget "$PER" \
  --deadline $(( LEFT - PER - 40 )) --out "$OUT/realcode" --work /tmp/s9-init-work >"$OUT/lanes.txt" 2>&1
cat "$OUT/realcode/results.md" 2>/dev/null | head -40
tar czf "$OUT/work.tar.gz" -C /tmp s9-init-work 2>/dev/null
