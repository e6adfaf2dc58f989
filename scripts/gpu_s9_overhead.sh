#!/usr/bin/env bash
# Session 9, issue 23 item 6 (s9-overhead): one evaluation's seconds by part on a GPU, and what
# llm.c layernorm v1's first request (12.6 s of one-off cost in session 8) is made of; see
# scripts/gpu_s9_overhead.py. About 2-3 min on one GPU. On the GPU host (.whl and shared/llmc carried):
#   OUT=/path bash scripts/gpu_s9_overhead.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s9_overhead_out}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >"$OUT/env.log" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; date -u +%FT%TZ; git log --oneline -1; } \
  >"$OUT/device.txt" 2>&1
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="${KTX_CACHE_DIR:-/tmp/ktx-s9-overhead-cache}"
rm -rf "$KTX_CACHE_DIR"  # cold: compiles, CuPy's kernels of ktx's own, verdicts
# ktx --help before the first line (the CLI imports only the command it runs)
TIMEFORMAT="ktx --help %R s"
{ time "${PY:-python3}" -m ktx --help >/dev/null; } 2>"$OUT/cli_time.txt"
timeout 200 "${PY:-python3}" scripts/gpu_s9_overhead.py --llmc "${LLMC:-shared/llmc}" --out "$OUT" \
  2>&1 | tee "$OUT/overhead.out"
cat "$OUT/cli_time.txt"
