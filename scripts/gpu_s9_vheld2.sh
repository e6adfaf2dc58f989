#!/usr/bin/env bash
# On one GPU (well under a minute): session 9's second round of vectorize extensions (s9-vheld2)
# verified against the original kernels, every width, no timing:
#   - one element per thread on the grid's y, no __restrict__ (per-pack disjoint check);
#   - an index through a body local (const int index = i * N + j);
#   - a read at var / m beside the write (the range check's quotient bound);
#   - an inclusive guard (if (idx > m * n) return;: element m * n runs);
#   - ldg(&p[i]) through a read-only load helper.
# From the repo root:  source scripts/gpu_env.sh && bash scripts/gpu_s9_vheld2.sh
set -euo pipefail
out=${OUT:-results/gpu_s9_vheld2}
mkdir -p "$out"
python3 -m pytest -q -p no:randomly -m gpu tests/passes/test_vectorize_vheld2_gpu.py 2>&1 | tee "$out/verify.log"
