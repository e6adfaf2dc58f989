#!/usr/bin/env bash
# The device calls of a session (each under 10 minutes) on a host of any size. Files back: at most 8, so outputs are
# tarred. The long job (real-code benchmark or llm.c ladder) runs on every GPU but the last; the last runs the
# issue scripts named in LANE3 (space-separated, scripts/ basenames, most valuable first; NAME.sh:ARG passes one
# argument), each given what is left of the call, each with its own OUT folder. On a one-GPU host both share
# GPU 0. LADDER_KERNELS (space-separated) limits the ladder to those kernels (default: all six); REALCODE_IDS
# (space-separated ids) limits the real-code benchmark to those kernels (default: every finished spec).
#   OUT=/path LANE3="gpu_s11_norms.sh ..." bash scripts/gpu_calls.sh realcode PER_KERNEL_S LIMIT_S [--resume]
#       the real-code benchmark (benchmarks/realcode/run.py --gpus N-1), both splits; a second call with --resume
#       keeps the rows of results/realcode_resume/results.json that ran and runs the rest
#   OUT=/path LANE3="..." bash scripts/gpu_calls.sh issue23 LIMIT_S
#       the llm.c ladder at its default budget on GPUs 0-2 (`run.py --budget 470 --gpus N-1`)
#   OUT=/path LANE3="..." bash scripts/gpu_calls.sh lanes LIMIT_S
#       only scripts, round-robin over the host's GPUs
#   OUT=/path LANE3="..." bash scripts/gpu_calls.sh one LIMIT_S
#       only scripts, one after the other on GPU 0 (a one-GPU host)
# Carry .whl (optuna, tree-sitter, tree-sitter-cuda, libclang), benchmarks/realcode/src, benchmarks/vheld/src,
# shared/llmc.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=$1; shift
OUT="${OUT:-$PWD/gpu_calls_out}"; mkdir -p "$OUT/g"
START=$(date +%s)
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  date -u +%FT%TZ; git log -1 --format='main %h %s' 2>/dev/null; } | tee "$OUT/device.txt"
left() { echo $(( $1 - ($(date +%s) - START) )); }
run_scripts() {  # LIMIT GPU SCRIPT...: one after the other on GPU, each given what is left (40 s kept back)
  local limit=$1 gpu=$2; shift 2
  for entry in "$@"; do  # NAME.sh or NAME.sh:ARG (one argument)
    local s=${entry%%:*} arg=""
    [ "$s" != "$entry" ] && arg=${entry#*:}
    local name=${s%.sh}${arg:+_$arg}
    if [ "$(left "$limit")" -le 60 ]; then echo "skipped: no time" >"$OUT/g/$name.txt"; continue; fi
    [ -f "scripts/$s" ] || { echo "missing: scripts/$s" >"$OUT/g/$name.txt"; continue; }
    echo "start $(date -u +%T) gpu $gpu" >"$OUT/g/$name.txt"
    CUDA_VISIBLE_DEVICES=$gpu KTX_SKIP_ENV=1 OUT="$OUT/g/$name" timeout "$(( $(left "$limit") - 40 ))" \
      bash "scripts/$s" $arg >>"$OUT/g/$name.txt" 2>&1
    echo "rc=$? end $(date -u +%T)" >>"$OUT/g/$name.txt"
  done
}
pack() {  # summaries on stdout, everything in one archive
  for f in "$OUT"/g/*.txt; do [ -f "$f" ] && { echo "== $f"; tail -12 "$f"; }; done
  tar czf "$OUT/lanes.tgz" -C "$OUT" g && rm -rf "$OUT/g"
}
read -r -a L3 <<<"${LANE3:-}"
NG=$(nvidia-smi -L | wc -l)
if [ "$NG" -gt 1 ]; then NL=$(( NG - 1 )); LASTG=$NL; else NL=1; LASTG=0; fi
LONGG=$(seq -s, 0 $(( NL - 1 )))
case "$MODE" in
realcode)
  PER=$1; LIMIT=$2; RESUME=${3:-}
  mkdir -p "$OUT/realcode"
  [ -n "$RESUME" ] && [ -f results/realcode_resume/results.json ] && cp results/realcode_resume/results.json "$OUT/realcode/"
  run_scripts "$LIMIT" "$LASTG" "${L3[@]}" &
  G3=$!
  LEFT=$(left "$LIMIT")
  CUDA_VISIBLE_DEVICES=$LONGG timeout "$LEFT" python3 benchmarks/realcode/run.py --budget "$PER" --gpus "$NL" ${REALCODE_IDS:+--ids $REALCODE_IDS} \
    --deadline $(( LEFT - PER - 45 )) --out "$OUT/realcode" --work /tmp/realcode-work $RESUME \
    >"$OUT/lane_realcode.txt" 2>&1
  echo "run.py rc=$?" >>"$OUT/lane_realcode.txt"
  wait "$G3"
  head -90 "$OUT/realcode/results.md" 2>/dev/null
  tar czf "$OUT/runs.tar.gz" --exclude='*.cu' --exclude='*.cuh' --exclude='*.patch' --exclude='*.html' \
    --exclude='*.png' -C /tmp realcode-work 2>/dev/null
  mv "$OUT/realcode/results.md" "$OUT/realcode/results.json" "$OUT/" 2>/dev/null
  rm -rf "$OUT/realcode"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" lane_realcode.txt env.txt && rm -f "$OUT/lane_realcode.txt" "$OUT/env.txt"
  pack
  ;;
issue23)
  LIMIT=$1
  mkdir -p "$OUT/ladder"
  read -r -a LK <<<"${LADDER_KERNELS:-}"
  CUDA_VISIBLE_DEVICES=$LONGG timeout "$(left "$LIMIT")" python3 benchmarks/llmc/run.py --llmc shared/llmc \
    --budget 470 --gpus "$NL" ${LK[@]:+--kernels "${LK[@]}"} --out "$OUT/ladder" >"$OUT/ladder/run.txt" 2>&1 &
  LD=$!
  run_scripts "$LIMIT" "$LASTG" "${L3[@]}"
  wait "$LD"
  tail -40 "$OUT/ladder/run.txt"
  tar czf "$OUT/ladder.tgz" -C "$OUT" ladder && rm -rf "$OUT/ladder"
  pack
  ;;
one)
  LIMIT=$1
  run_scripts "$LIMIT" 0 "${L3[@]}"
  pack
  ;;
lanes)
  LIMIT=$1
  pids=()
  for g in $(seq 0 $(( NG - 1 ))); do
    mine=()
    for i in "${!L3[@]}"; do [ $(( i % NG )) -eq "$g" ] && mine+=("${L3[$i]}"); done
    [ ${#mine[@]} -gt 0 ] && { run_scripts "$LIMIT" "$g" "${mine[@]}" & pids+=($!); }
  done
  wait "${pids[@]}"
  pack
  ;;
esac
