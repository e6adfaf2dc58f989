#!/usr/bin/env bash
# Issue 12 parts 3, 5, 6 on a GPU host, one step per call (each fits one 10-minute command):
#   bash scripts/gpu_issue12.sh tests    # ~2 min: gpu tests of the paired check and tune
#   bash scripts/gpu_issue12.sh record   # ~6 min: exhaustive act_and_mul_scalar space (2,304 configs x 2 shapes, cut at 330 s)
#   bash scripts/gpu_issue12.sh bench    # ~5.5 min: default-set silu tune under --time-limit 300
# Results go to $OUT (default ./out); compare samplers afterwards on any CPU:
#   python3 scripts/compare_samplers.py kernels/act_and_mul_scalar $OUT/space_act_and_mul_scalar.json \
#       --shape tokens=16,d=4096 --fractions 0.01,0.05,0.1 --seeds 20 --json compare.json
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
source scripts/gpu_env.sh
export KTX_CACHE_DIR=${KTX_CACHE_DIR:-/tmp/ktx-cache}
case "${1:-}" in
  tests)
    python3 -m pytest -q -m gpu tests/search/test_tune_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/issue12_gpu_tests.txt"
    ;;
  record)
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/record_space_gpu.txt" 2>&1
    python3 scripts/record_space.py --out "$OUT/space_act_and_mul_scalar.json" 2>&1 | tee "$OUT/record_space.txt"
    ;;
  bench)
    python3 scripts/bench_time_limit.py --out "$OUT" 2>&1 | tee "$OUT/bench_time_limit.txt"
    ;;
  *)
    echo "usage: $0 tests|record|bench" >&2
    exit 2
    ;;
esac
