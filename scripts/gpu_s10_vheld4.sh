#!/usr/bin/env bash
# On one GPU (well under a minute): session 10's vectorize extensions (s10-vheld4) verified
# against the original kernels, every width, no timing:
#   - a read at a conditional index a[t ? j : i] behind the range check of both branches' hull
#     (CTranslate2's dequantize_gemm_output_kernel), each (ta, tb);
#   - one element per thread with a specialization sharing its launches: the grid kept as
#     written (FasterTransformer's sigmoid_kernel<half2>);
#   - the store every branch of an if / else if / else chain makes (CTranslate2's rotary_kernel).
# From the repo root:  source scripts/gpu_env.sh && bash scripts/gpu_s10_vheld4.sh
set -euo pipefail
out=${OUT:-results/gpu_s10_vheld4}
mkdir -p "$out"
python3 -m pytest -q -p no:randomly -m gpu tests/passes/test_vectorize_vheld4_gpu.py 2>&1 | tee "$out/verify.log"
