#!/usr/bin/env bash
# s11-fresh's GPU evidence, one GPU, under 4 minutes:
#   OUT=/path bash scripts/gpu_s11_fresh.sh [PER_KERNEL_S=15]
# The real-code benchmark's own command (`ktx bench`, then `ktx optimize --planner rules
# --shapes default`) on the 11 lmdeploy (turbomind) kernels of session 11, all held out: RMSNorm,
# QkRMSNorm, LayerNorm, BiasResidualRMSNormKernel, activation_kernel, ActivationKernel,
# quant_symm_row, quant_symm_block, embeddingLookupKernel, MoeGatherKernel, MoeReduceKernel.
# Never run on a GPU: "does it run" (ran / failed per kernel in results.md), then "does it get
# faster". 11 kernels at 15 s do not all fit one call: --deadline stops starting kernels, and a
# second call with --resume (RESUME=1) runs the rest.
# Carry .whl (optuna, tree-sitter, tree-sitter-cuda, libclang) and benchmarks/realcode/src
# (fetch.py writes src/lmdeploy with fmt 11.1.4 under src/lmdeploy/_deps).
set -uo pipefail
cd "$(dirname "$0")/.."
PER=${1:-15}
OUT="${OUT:-$PWD/gpu_s11_fresh_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | head -1
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
python3 benchmarks/realcode/run.py --gpus 1 --budget "$PER" --deadline 190 --out "$OUT" ${RESUME:+--resume} \
  --ids lmdeploy__RMSNorm lmdeploy__QkRMSNorm lmdeploy__LayerNorm lmdeploy__activation_kernel \
        lmdeploy__embeddingLookupKernel lmdeploy__quant_symm_row lmdeploy__MoeGatherKernel \
        lmdeploy__BiasResidualRMSNormKernel lmdeploy__ActivationKernel lmdeploy__quant_symm_block \
        lmdeploy__MoeReduceKernel 2>&1 | tee "$OUT/run.txt"
