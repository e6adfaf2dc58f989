#!/usr/bin/env bash
# Session 6's test call on a 4-GPU host, one lane per GPU, inside one device command:
#   GPU 0: every gpu test of the passes group   (scripts/gpu_tests.sh passes)
#   GPU 1: the measure group                    (scripts/gpu_tests.sh measure)
#   GPU 2: the other group and any gpu test file no list names (scripts/gpu_tests.sh other)
#   GPU 3: issue 18's evidence                  (scripts/gpu_issue18.sh, when it exists)
#
#   OUT=/path bash scripts/gpu_session6.sh [BUDGET_SECONDS]
#
# Each lane writes its own tarball under $OUT (at most 8 files come back); the lanes' tables are
# printed at the end. Carry .whl (and shared/llmc for the llm.c tests).
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-540}"
OUT="${OUT:-$PWD/gpu_session6_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$OUT/device.txt"
git log -1 --format='%H %s' 2>/dev/null | cut -c1-120 | tee -a "$OUT/device.txt"
pids=()
for lane in 0 1 2; do
  group=$( [ $lane = 0 ] && echo passes || { [ $lane = 1 ] && echo measure || echo other; } )
  CUDA_VISIBLE_DEVICES=$lane OUT="$OUT" bash scripts/gpu_tests.sh "$group" "$BUDGET" \
    >"$OUT/lane$lane.txt" 2>&1 &
  pids+=($!)
done
if [ -f scripts/gpu_issue18.sh ]; then
  mkdir -p "$OUT/issue18"
  CUDA_VISIBLE_DEVICES=3 OUT="$OUT/issue18" timeout "$BUDGET" bash scripts/gpu_issue18.sh \
    >"$OUT/lane3.txt" 2>&1 &
  pids+=($!)
fi
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ -d "$OUT/issue18" ]; then
  tar czf "$OUT/issue18.tar.gz" -C "$OUT" issue18 && rm -rf "$OUT/issue18"
fi
for f in "$OUT"/lane*.txt; do echo "== $f"; tail -25 "$f"; done
tar czf "$OUT/lanes.tar.gz" -C "$OUT" $(cd "$OUT" && ls lane*.txt env.txt) && rm -f "$OUT"/lane*.txt "$OUT/env.txt"
exit $status
