#!/usr/bin/env bash
# Session 9's device calls on a 4-GPU host (each under 10 minutes). Files back: at most 8, so outputs are tarred.
#   OUT=/path bash scripts/gpu_session9.sh early LIMIT_S
#       issue 23's measurements that need no new code: `--workers 3` against `--workers 1` side by side
#       (scripts/gpu_issue23_workers.sh, N=3: w1 on GPU 0, w3 on GPUs 1-3), then the cost-model sampler
#       against TPE (scripts/gpu_search_model.sh), one seed a GPU
#   OUT=/path bash scripts/gpu_session9.sh realcode PER_KERNEL_S LIMIT_S [--resume]
#       the real-code benchmark (benchmarks/realcode/run.py), every GPU a lane, both splits; a second call with
#       --resume keeps the rows of results/session9_realcode/results.json and runs the rest
#   OUT=/path bash scripts/gpu_session9.sh issue23 LIMIT_S
#       the llm.c ladder at its default budget on GPUs 0-2 (`run.py --budget 470 --gpus 3`), and on GPU 3 the
#       helpers' scripts/gpu_s9_*.sh one after the other
# Carry .whl (optuna, tree-sitter, tree-sitter-cuda, libclang), benchmarks/realcode/src, shared/llmc.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=$1; shift
OUT="${OUT:-$PWD/gpu_session9_out}"; mkdir -p "$OUT"
START=$(date +%s)
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  date -u +%FT%TZ; } | tee "$OUT/device.txt"
left() { echo $(( $1 - ($(date +%s) - START) )); }
case "$MODE" in
early)
  LIMIT=$1
  mkdir -p "$OUT/w" "$OUT/s"
  KTX_SKIP_ENV=1 N=3 LIMIT=200 OUT="$OUT/w" timeout "$(left "$LIMIT")" bash scripts/gpu_issue23_workers.sh \
    >"$OUT/w/workers.txt" 2>&1
  cat "$OUT/w/workers.md" 2>/dev/null
  pids=()
  for seed in 1 2 3; do
    CUDA_VISIBLE_DEVICES=$((seed - 1)) KTX_SKIP_ENV=1 SEEDS=$seed JOBS=4 RUNS=/tmp/sm$seed OUT="$OUT/s" \
      timeout "$(left "$LIMIT")" bash scripts/gpu_search_model.sh >"$OUT/s/seed$seed.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  tail -5 "$OUT"/s/seed*.txt
  tar czf "$OUT/early.tgz" -C "$OUT" w s && rm -rf "$OUT/w" "$OUT/s"
  ;;
realcode)
  PER=$1; LIMIT=$2; RESUME=${3:-}
  mkdir -p "$OUT/realcode"
  [ -n "$RESUME" ] && [ -f results/session9_realcode/results.json ] && cp results/session9_realcode/results.json "$OUT/realcode/"
  LEFT=$(left "$LIMIT")
  timeout "$LEFT" python3 benchmarks/realcode/run.py --budget "$PER" --deadline $(( LEFT - PER - 45 )) \
    --out "$OUT/realcode" --work /tmp/realcode-work $RESUME >"$OUT/lane_realcode.txt" 2>&1
  echo "run.py rc=$?" >>"$OUT/lane_realcode.txt"
  head -90 "$OUT/realcode/results.md" 2>/dev/null
  tar czf "$OUT/runs.tar.gz" -C /tmp realcode-work 2>/dev/null
  mv "$OUT/realcode/results.md" "$OUT/realcode/results.json" "$OUT/" 2>/dev/null
  rm -rf "$OUT/realcode"
  tar czf "$OUT/logs.tar.gz" -C "$OUT" lane_realcode.txt env.txt && rm -f "$OUT/lane_realcode.txt" "$OUT/env.txt"
  ;;
issue23)
  LIMIT=$1
  mkdir -p "$OUT/ladder" "$OUT/g3"
  CUDA_VISIBLE_DEVICES=0,1,2 timeout "$(left "$LIMIT")" python3 benchmarks/llmc/run.py --llmc shared/llmc \
    --budget 470 --gpus 3 --out "$OUT/ladder" >"$OUT/ladder/run.txt" 2>&1 &
  L=$!
  # GPU 3: the helpers' evidence, most valuable first, each given what is left of the call
  lane3() {  # NAME CMD...
    local name=$1; shift
    [ "$(left "$LIMIT")" -gt 40 ] || { echo "skipped: no time" >"$OUT/g3/$name.txt"; return; }
    CUDA_VISIBLE_DEVICES=3 OUT="$OUT/g3/$name" timeout "$(left "$LIMIT")" "$@" >"$OUT/g3/$name.txt" 2>&1
    echo "rc=$?" >>"$OUT/g3/$name.txt"
  }
  lane3 rows_time bash scripts/gpu_s9_rows.sh time
  lane3 overhead bash scripts/gpu_s9_overhead.sh
  lane3 vheld bash scripts/gpu_s9_vheld.sh
  STEPS=12 lane3 blocked bash scripts/gpu_s9_blocked.sh
  lane3 rows_verify bash scripts/gpu_s9_rows.sh verify
  wait "$L"
  tail -40 "$OUT/ladder/run.txt"
  for f in "$OUT"/g3/*.txt; do echo "== $f"; tail -8 "$f"; done
  tar czf "$OUT/issue23.tgz" -C "$OUT" ladder g3 && rm -rf "$OUT/ladder" "$OUT/g3"
  ;;
esac
