#!/bin/bash
# Issue 12 (measurement layer) on a GPU: the gpu-marked verification and warm-up tests, the
# two-levels diagnostic and the harness benchmark; everything lands in $OUT/measure.tgz.
#   source scripts/gpu_env.sh && bash scripts/gpu_measure.sh [tests|levels|bench|all]
# About 2 min for tests, 1-2 min for levels, 4-6 min for bench (each fits one 10-minute call).
set -u
OUT=${OUT:-/tmp/out}
part=${1:-all}
dir="$OUT/measure"
mkdir -p "$dir"
status=0
if [ "$part" = tests ] || [ "$part" = all ]; then
  python3 -m pytest -q -m gpu tests/measure/test_gpu_verify.py -p no:cacheprovider -rA \
    > "$dir/pytest_gpu_verify.txt" 2>&1 || status=1
  tail -5 "$dir/pytest_gpu_verify.txt"
fi
if [ "$part" = levels ] || [ "$part" = all ]; then
  python3 scripts/gpu_levels.py --out "$dir" > "$dir/levels.log" 2>&1 || status=1
  tail -30 "$dir/levels.log"
fi
if [ "$part" = bench ] || [ "$part" = all ]; then
  python3 scripts/bench_harness.py --out "$dir" > "$dir/bench.log" 2>&1 || status=1
  tail -40 "$dir/bench.log"
fi
tar czf "$OUT/measure-$part.tgz" -C "$OUT" measure && rm -rf "$dir"
exit $status
