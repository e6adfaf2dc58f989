#!/usr/bin/env bash
# On one GPU (well under a minute): session 9's third round of vectorize extensions (s9-vheld3)
# verified against the original kernels, every width, no timing:
#   - one element per thread of a template type T no launch names (float and double; double's
#     widest width takes its elements one by one under if constexpr);
#   - a 2-D grid flattened row by row ((blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + tid);
#   - the one store of a loop made in both branches of an if/else.
# From the repo root:  source scripts/gpu_env.sh && bash scripts/gpu_s9_vheld3.sh
set -euo pipefail
out=${OUT:-results/gpu_s9_vheld3}
mkdir -p "$out"
python3 -m pytest -q -p no:randomly -m gpu tests/passes/test_vectorize_vheld3_gpu.py 2>&1 | tee "$out/verify.log"
