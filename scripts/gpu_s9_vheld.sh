#!/usr/bin/env bash
# On one GPU (about a minute): session 9's vectorize extensions (s9-vheld) verified against the
# original kernels, no timing:
#   - reads at other indices than the write behind a run-time range check (FasterTransformer's
#     add-bias shape: bias[i % h], scale[0], in[i + 1], no __restrict__): every width with the
#     pointers apart (packs run, 64 blocks), and with a read inside the written range on one
#     thread (the check must keep the original order);
#   - a template element type no launch names (sizeof picks the pack): float, half, double.
# Also reruns the existing per-thread vectorize GPU tests (unchanged code paths, as a guard).
# From the repo root:  source scripts/gpu_env.sh && bash scripts/gpu_s9_vheld.sh
set -euo pipefail
out=${OUT:-results/gpu_s9_vheld}
mkdir -p "$out"
python3 -m pytest -q -p no:randomly -m gpu \
  tests/passes/test_vectorize_ranged_gpu.py tests/passes/test_vectorize_thread_gpu.py \
  2>&1 | tee "$out/verify.log"
