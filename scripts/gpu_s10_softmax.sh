#!/usr/bin/env bash
# Session 10, s10-softmax: GPU evidence for issue 23 item 1 (llm.c softmax) on ONE GPU, under 4
# minutes. From the repo root, with shared/llmc (or ../shared/llmc) carried:
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_softmax.sh
# Steps, each capped (skipped once the budget is spent):
#   1 (<= 170 s) scripts/gpu_s10_softmax.py: llm.c softmax v1 under row-owner,online at the
#     configs this session's changes are for (a warp per row in blocks of ROW_BLOCK = 128 / 1024;
#     a block per row of 128 ... 1024 threads with the fused loop's constant step; both also with
#     vectorize{tie,peel} packing the write loop, VEC_LOOPS=4), each verified
#     against the Python reference and timed; v7 and online8 at blocks 256 / 1024 timed in the
#     same harness; per shape the fastest of each side re-timed alternately (8 pairs): ktx / hand
#     with its 95% interval                                            -> softmax/results.{md,json}
#   2 (the rest, <= 60 s) every online config of softmax v1 verified against the original kernel
#     on the device (tests/passes/test_online_gpu.py -k softmax: every THREADS_PER_ROW, and
#     ROW_BLOCK 128 / 1024 for a warp per row)                          -> pytest.log
# Targets (issue 23): 1x50257 and 8x50257 within 1.2x of v7, 8x768 within 1.05x of online8.
# Results under $OUT (s10_softmax.tgz). Exit status 0 when every config of step 1 verified.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s10_softmax_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
END=$((SECONDS + 230))
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true
cap() { local left=$((END - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"; }

t=$(cap 170)
timeout "$t" "$PY" scripts/gpu_s10_softmax.py --llmc "$LLMC" --out "$OUT/softmax" \
  --budget $((t > 20 ? t - 20 : 1)) > "$OUT/softmax.log" 2>&1
rc=$?
echo "softmax rc=$rc" >> "$OUT/softmax.log"

t=$(cap 60)
timeout "$t" "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
  tests/passes/test_online_gpu.py -k softmax -x > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"

echo "== pytest"; tail -n 5 "$OUT/pytest.log"
echo "== softmax"; tail -n 30 "$OUT/softmax.log"
echo "wall ${SECONDS}s"
tar -czf "$OUT/s10_softmax.tgz" -C "$OUT" --exclude cache --exclude stage --exclude '*.tgz' . 2>/dev/null
exit $rc
