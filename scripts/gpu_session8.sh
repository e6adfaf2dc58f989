#!/usr/bin/env bash
# Session 8's device calls on a 4-GPU host (each under 10 minutes). Files back: at most 8.
#   OUT=/path bash scripts/gpu_session8.sh realcode PER_KERNEL_S LIMIT_S [--resume]
#       the real-code benchmark (benchmarks/realcode/run.py), every GPU a lane, both splits; a second
#       call with --resume keeps the rows that ran and starts the rest
#   OUT=/path bash scripts/gpu_session8.sh issue23 LIMIT_S
#       scripts/gpu_issue23_rows.sh (verify every new config, time the ladder rows and the norms)
#   OUT=/path bash scripts/gpu_session8.sh tests LIMIT_S
#       the gpu tests of this session's work (lanes by file)
# Carry .whl (optuna, tree-sitter, tree-sitter-cuda, libclang), benchmarks/realcode/src, shared/llmc.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=$1; shift
OUT="${OUT:-$PWD/gpu_session8_out}"; mkdir -p "$OUT"
START=$(date +%s)
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
case "$MODE" in
realcode)
  PER=$1; LIMIT=$2; RESUME=${3:-}
  mkdir -p "$OUT/realcode"
  [ -n "$RESUME" ] && [ -f results/session8_realcode/results.json ] && cp results/session8_realcode/results.json "$OUT/realcode/"
  LEFT=$(( LIMIT - ($(date +%s) - START) ))
  timeout "$LEFT" python3 benchmarks/realcode/run.py --budget "$PER" --deadline $(( LEFT - PER - 45 )) \
    --out "$OUT/realcode" --work /tmp/realcode-work $RESUME >"$OUT/lane_realcode.txt" 2>&1
  echo "run.py rc=$?" >>"$OUT/lane_realcode.txt"
  cat "$OUT/realcode/results.md" 2>/dev/null | head -90
  tar czf "$OUT/runs.tar.gz" -C /tmp realcode-work 2>/dev/null
  mv "$OUT/realcode/results.md" "$OUT/realcode/results.json" "$OUT/" 2>/dev/null
  rm -rf "$OUT/realcode"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" lane_realcode.txt env.txt && rm -f "$OUT/lane_realcode.txt" "$OUT/env.txt"
  ;;
issue23)
  LIMIT=$1
  OUT="$OUT/i23" timeout "$LIMIT" bash scripts/gpu_issue23_rows.sh >"$OUT/issue23.txt" 2>&1
  tail -80 "$OUT/issue23.txt"
  mv "$OUT/i23/issue23.tgz" "$OUT/" 2>/dev/null; rm -rf "$OUT/i23"
  ;;
tests)
  LIMIT=$1; shift
  mkdir -p "$OUT/t"
  i=0; pids=()
  for f in "$@"; do
    ( CUDA_VISIBLE_DEVICES=$((i % 4)) timeout "$LIMIT" python3 -m pytest -q -m gpu -p no:cacheprovider "$f" \
        >"$OUT/t/$(basename "$f" .py).txt" 2>&1; echo "rc=$?" >>"$OUT/t/$(basename "$f" .py).txt" ) &
    pids+=($!); i=$((i + 1))
  done
  wait "${pids[@]}"
  for f in "$OUT"/t/*.txt; do echo "== $f"; tail -4 "$f"; done
  tar czf "$OUT/tests.tar.gz" -C "$OUT" t && rm -rf "$OUT/t"
  ;;
esac
