#!/usr/bin/env bash
# Session 7's one device call on a 4-GPU host (at most 10 minutes; issue 21 and 22's GPU evidence):
#   GPU 0:    the gpu tests of what this session built (struct arguments, lowered names, the
#             original-writes-its-outputs guard, the bounds witness under compute-sanitizer, the
#             new passes), then the suite's own gpu smoke test
#   GPUs 1-3: the real-code benchmark (benchmarks/realcode/run.py): ktx bench, then
#             ktx optimize --planner rules --shapes default at a fixed budget, per kernel
#
#   OUT=/path bash scripts/gpu_session7.sh [BUDGET_SECONDS] [PER_KERNEL_S]
#
# Carry .whl and benchmarks/realcode/src. Files back: device.txt, tests.tar.gz, realcode
# results.{md,json} and realcode-runs.tar.gz, lanes.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-450}"
PER_KERNEL="${2:-25}"
START=$(date +%s)
OUT="${OUT:-$PWD/gpu_session7_out}"
mkdir -p "$OUT/realcode" "$OUT/tests"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  date -u +%Y-%m-%dT%H:%M:%SZ; git rev-parse HEAD 2>/dev/null || true; } | tee "$OUT/device.txt"
LEFT=$(( BUDGET - ($(date +%s) - START) - 20 ))
TESTS=$(ls tests/measure/test_struct_args_gpu.py tests/measure/test_lowered_names_gpu.py \
  tests/measure/test_gpu_guards.py tests/ir/test_facts_extents.py tests/passes/*online*gpu*.py \
  tests/passes/test_row_registers_gpu.py \
  tests/kernels/test_gpu.py 2>/dev/null)
( CUDA_VISIBLE_DEVICES=0 timeout "$LEFT" python3 -m pytest -v -m gpu -p no:cacheprovider \
    --junitxml="$OUT/tests/junit.xml" $TESTS >"$OUT/tests/stdout.txt" 2>&1; echo "tests exit $?" >>"$OUT/tests/stdout.txt" ) &
tp=$!
CUDA_VISIBLE_DEVICES=1,2,3 timeout "$LEFT" python3 benchmarks/realcode/run.py --budget "$PER_KERNEL" \
  --deadline $(( LEFT - 4 * PER_KERNEL - 40 )) --out "$OUT/realcode" --work /tmp/realcode-work >"$OUT/lane_realcode.txt" 2>&1 &
rp=$!
wait $rp; wait $tp
tail -25 "$OUT/tests/stdout.txt"; echo; cat "$OUT/realcode/results.md" 2>/dev/null | head -80
tar czf "$OUT/tests.tar.gz" -C "$OUT" tests && rm -rf "$OUT/tests"
tar czf "$OUT/lanes.tar.gz" -C "$OUT" lane_realcode.txt env.txt && rm -f "$OUT/lane_realcode.txt" "$OUT/env.txt"
ls -la "$OUT" "$OUT/realcode"
