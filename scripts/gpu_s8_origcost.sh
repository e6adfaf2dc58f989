#!/usr/bin/env bash
# Issue 23 item 6's GPU evidence (about 3 min on one GPU): llm.c layernorm v1's originals, their
# cost accounts, and `ktx optimize --budget 78` (which refused every round before): see
# scripts/gpu_s8_origcost.py. Usage on the GPU host (.whl and shared/llmc carried):
#   OUT=/path bash scripts/gpu_s8_origcost.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s8_origcost_out}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >"$OUT/env.log" 2>&1
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="${KTX_CACHE_DIR:-/tmp/ktx-s8-origcost-cache}"
rm -rf "$KTX_CACHE_DIR"  # a fresh cache: the first measurement checks the Python reference
"${PY:-python3}" scripts/gpu_s8_origcost.py --llmc "${LLMC:-shared/llmc}" --out "$OUT" --budget "${BUDGET:-78}" \
  2>&1 | tee "$OUT/origcost.out"
