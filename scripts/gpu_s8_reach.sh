#!/usr/bin/env bash
# Session 8, branch s8-reach: the real-code kernels this branch unblocked, run end to end on the GPU, and
# the struct-argument GPU tests (arrays of structs behind a pointer among them).
#   GPU 0: tests/measure/test_struct_args_gpu.py (needs libclang: carry the .whl set gpu_env.sh installs)
#   every GPU (lanes): benchmarks/realcode/run.py on the eight kernels this branch made runnable
#   OUT=/path bash scripts/gpu_s8_reach.sh [PER_KERNEL_S] [LIMIT_S]
# Carry .whl and benchmarks/realcode/src (fetch.py writes it; it now includes bitsandbytes' ops.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
PER="${1:-40}"; LIMIT="${2:-540}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_s8_reach_out}"; mkdir -p "$OUT/realcode"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee "$OUT/device.txt"
( CUDA_VISIBLE_DEVICES=0 timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider tests/measure/test_struct_args_gpu.py ) \
  >"$OUT/struct_tests.txt" 2>&1
IDS=(ggml__rope_norm bitsandbytes__kQuantizeBlockwise bitsandbytes__kDequantizeBlockwise
     deepspeed__logits_gather_kernel apex__welford_kernel
     exllamav2__rms_norm_kernel llm-awq__silu_and_mul_kernel llm-awq__quant_kernel)
LEFT=$(( LIMIT - ($(date +%s) - START) ))
timeout "$LEFT" python3 benchmarks/realcode/run.py --ids "${IDS[@]}" --budget "$PER" \
  --deadline $(( LEFT - PER - 60 )) --out "$OUT/realcode" --work /tmp/s8-reach-work >"$OUT/lanes.txt" 2>&1
tail -5 "$OUT/struct_tests.txt"; cat "$OUT/realcode/results.md" 2>/dev/null | head -60
tar czf "$OUT/work.tar.gz" -C /tmp s8-reach-work 2>/dev/null
