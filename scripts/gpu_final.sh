#!/usr/bin/env bash
# Session 6's closing device call on a 4-GPU host, one lane per GPU (at most 10 minutes):
#   GPUs 0-2: every gpu-marked test, in scripts/gpu_tests.sh's groups passes, measure, other
#   GPU 3:    the llm.c ladder's softmax_forward again (its rows were the only ones to move by
#             more than 0.02 against issue 17's baseline in the first ladder run)
#
#   OUT=/path bash scripts/gpu_final.sh [BUDGET_SECONDS]
#
# Files back: device.txt, tests-{passes,measure,other}.tar.gz, softmax/results.{json,md},
# softmax/llmc-runs.tar.gz, lanes.tar.gz (8 at most). Carry .whl and shared (shared/llmc).
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-540}"
START=$(date +%s)
OUT="${OUT:-$PWD/gpu_final_out}"
mkdir -p "$OUT/softmax"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
LANE=$(( BUDGET - ($(date +%s) - START) - 15 ))
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  date -u +%Y-%m-%dT%H:%M:%SZ; echo "lanes: ${LANE} s each"; } | tee "$OUT/device.txt"
pids=()
groups=(passes measure other)
for lane in 0 1 2; do
  CUDA_VISIBLE_DEVICES=$lane OUT="$OUT" bash scripts/gpu_tests.sh "${groups[$lane]}" "$LANE" \
    >"$OUT/lane$lane.txt" 2>&1 &
  pids+=($!)
done
CUDA_VISIBLE_DEVICES=3 python3 benchmarks/llmc/run.py --llmc shared/llmc --budget $(( LANE - 50 )) \
  --kernels softmax_forward --out "$OUT/softmax" >"$OUT/lane3.txt" 2>&1 &
pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for f in "$OUT"/lane*.txt; do echo "== $f"; tail -14 "$f"; done
tar czf "$OUT/lanes.tar.gz" -C "$OUT" lane0.txt lane1.txt lane2.txt lane3.txt env.txt \
  && rm -f "$OUT"/lane*.txt "$OUT/env.txt"
exit $status
