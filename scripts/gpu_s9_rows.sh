#!/usr/bin/env bash
# Session 9, s9-rows: GPU evidence for issue 23 items 1-4 on ONE GPU. Three modes, each one call
# under 4 minutes (steps one after another, each capped, skipped once 230 s are spent). From the
# repo root, with shared/llmc (or ../shared/llmc) carried:
#   source scripts/gpu_env.sh && bash scripts/gpu_s9_rows.sh time     # (default) steps 2 and 4
#   source scripts/gpu_env.sh && bash scripts/gpu_s9_rows.sh verify   # step 1
#   source scripts/gpu_env.sh && bash scripts/gpu_s9_rows.sh ladder   # step 3
# In order of value: time (the gains; every config ktx bench times is verified there too), then
# ladder (the softmax row needs most of 4 minutes alone: its naive original takes ~40 ms a launch
# at C=50257, and a round needs twice the originals' measuring time), then verify (exhaustive).
#   1 verify (no timing): every PACKS config of row-registers on rmsnorm and fused_add_rmsnorm, alone
#     and after block-size at BLOCK_Y 1/4/8/32 (the loads-first head is new this session), and
#     block-size,cluster-rows,row-registers at the wide-row points with the hand variant
#     (tests/passes/test_row_registers_gpu.py -k every_packs, tests/passes/test_cluster_rows.py -k
#     wide)                                                       -> verify_rows.log, verify_wide.log
#   2 time, each config beside the original in the same ktx bench call (verified there):
#     rmsnorm block-size,row-registers at (BLOCK_Y, PACKS) = (8, 2) and (4, 4), shapes `rows`
#     (tokens=1,d=8192; 1024,4096; 4096,4096): issue 23's hand variant's form (one block a row,
#     2-4 packs a thread, the weight loaded with the row)          -> rms_Y*.txt
#     rmsnorm block-size,cluster-rows,row-registers at (4, 8, 1) and the hand cluster kernel
#     (benchmarks/cluster_rows), shapes decode                    -> wide.txt, hand.txt
#     softmax v1 under row-owner,online at THREADS_PER_ROW=1024, ONLINE=1, shapes ladder,
#     verified against the Python reference                       -> softmax_O1.txt
#     real code: FlashInfer RMSNormKernel under row-registers PACKS=1 (the row and the weight read
#     once, loads first), its default shapes (needs benchmarks/realcode/src) -> fi_P1.txt
#   4 ktx optimize --planner rules of kernels/rmsnorm and kernels/fused_add_rmsnorm, shapes `rows`,
#     the time left split between them (round 1 is now block-size,row-registers; round 2 adds
#     cluster-rows)                                               -> rmsnorm/, fused_add_rmsnorm/
#   3 the llm.c ladder, softmax only (benchmarks/llmc/run.py --budget 185, rules planner,
#     hand-written v7 / online8 benched beside; round 1 is now row-owner,online) -> ladder/
# Results under $OUT (s9_rows_<mode>.tgz). Exit status 0 when the mode's checks passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s9_rows_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
MODE="${1:-time}"
case "$MODE" in time|verify|ladder) ;; *) echo "usage: $0 [time|verify|ladder]" >&2; exit 2 ;; esac
END=$((SECONDS + 230))
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true

# cap S: S seconds, or what is left of the budget (0: skip the step)
cap() { local left=$((END - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"; }

# bench NAME DIR SHAPES PIPELINE CONFIG... : one ktx bench call (the original timed beside it)
bench() {
  local name=$1 dir=$2 shapes=$3 passes=$4; shift 4
  local t; t=$(cap "${BCAP:-30}")
  [ "$t" -gt 5 ] || { echo "$name: skipped, budget spent"; return; }
  local args=()
  for c in "$@"; do args+=(--config "$c"); done
  [ -n "$passes" ] && args+=(--passes "$passes")
  timeout "$t" "$PY" -m ktx bench "$dir" "${args[@]}" --shapes "$shapes" ${REF:+--reference "$REF"} \
    --json "$OUT/$name.json" \
    > "$OUT/$name.txt" 2>&1
  echo "$name rc=$?"
}

if [ "$MODE" = ladder ]; then
  # 3 the softmax ladder row (run.py kills what still runs at --budget + 45 s)
  timeout 235 "$PY" benchmarks/llmc/run.py --llmc "$LLMC" --kernels softmax_forward \
    --budget 185 --gpus 1 --out "$OUT/ladder" > "$OUT/ladder.log" 2>&1
  echo "ladder rc=$?" >> "$OUT/ladder.log"
  echo "== ladder"; cat "$OUT/ladder/results.md" 2>/dev/null || tail -n 20 "$OUT/ladder.log"
  grep -h "round\|budget\|re-check" "$OUT"/ladder/*.log 2>/dev/null | tail -5
  echo "wall ${SECONDS}s"
  tar -czf "$OUT/s9_rows_ladder.tgz" -C "$OUT" --exclude cache --exclude stage --exclude '*.tgz' . 2>/dev/null
  grep -q "ladder rc=0" "$OUT/ladder.log"
  exit
fi

if [ "$MODE" = verify ]; then
  # 1 verify
  timeout "$(cap 170)" "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
    tests/passes/test_row_registers_gpu.py -k every_packs > "$OUT/verify_rows.log" 2>&1
  echo "verify rows rc=$?" >> "$OUT/verify_rows.log"
  timeout "$(cap 60)" "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
    tests/passes/test_cluster_rows.py -k wide > "$OUT/verify_wide.log" 2>&1
  echo "verify wide rc=$?" >> "$OUT/verify_wide.log"
  tail -n 4 "$OUT/verify_rows.log" "$OUT/verify_wide.log"
  echo "wall ${SECONDS}s"
  tar -czf "$OUT/s9_rows_verify.tgz" -C "$OUT" verify_rows.log verify_wide.log 2>/dev/null
  grep -q "rows rc=0" "$OUT/verify_rows.log" && grep -q "wide rc=0" "$OUT/verify_wide.log"
  exit
fi

# 2 time
{
  bench rms_Y8_P2 kernels/rmsnorm rows block-size,row-registers BLOCK_Y=8 PACKS=2
  bench rms_Y4_P4 kernels/rmsnorm rows block-size,row-registers BLOCK_Y=4 PACKS=4
  bench wide kernels/rmsnorm decode block-size,cluster-rows,row-registers BLOCK_Y=4 CLUSTER=8 PACKS=1
  bench hand benchmarks/cluster_rows decode ""
  # 2b softmax v1, staged beside the llm.c file as run.py stages it
  stage="$OUT/stage"
  "$PY" - "$LLMC" "$stage" <<'PYEOF'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("llmc_run", "benchmarks/llmc/run.py")
run = importlib.util.module_from_spec(spec); sys.modules["llmc_run"] = run; spec.loader.exec_module(run)
lad = next(l for l in run.LADDERS if l.name == "softmax_forward")
print(run.stage(lad, lad.naive, run.llmc_cuda_dir(sys.argv[1]), Path(sys.argv[2])))
PYEOF
  # (row-owner alone, ONLINE=0, is session 8's ladder row: 28.5 / 492.7 / 2565.4 us on H200;
  # the naive original takes ~40 ms a launch: the Python reference verifies instead)
  BCAP=40 REF=python bench softmax_O1 "$stage/softmax_forward-v1" ladder row-owner,online \
    THREADS_PER_ROW=1024 ONLINE=1
  # real code: FlashInfer's RMSNormKernel (its guarded packs are kept since this session); needs
  # benchmarks/realcode/src carried (benchmarks/realcode/fetch.py)
  if [ -d benchmarks/realcode/src/flashinfer ]; then
    bench fi_P1 benchmarks/realcode/flashinfer__RMSNormKernel default row-registers PACKS=1
  else
    echo "fi_P1: skipped, benchmarks/realcode/src not carried"
  fi
} > "$OUT/time.log" 2>&1

# 4 optimize the suite's norms at a fixed budget (the time left, split between the two)
for k in rmsnorm fused_add_rmsnorm; do
  if [ "$k" = rmsnorm ]; then t=$(((END - SECONDS) / 2)); else t=$((END - SECONDS)); fi
  if [ "$t" -gt 20 ]; then
    timeout "$t" "$PY" -m ktx optimize "kernels/$k" --planner rules --shapes rows --budget $((t - 8)) \
      --out "$OUT/$k" > "$OUT/$k.log" 2>&1
    echo "$k rc=$?" >> "$OUT/$k.log"
  else
    echo "$k: skipped, budget spent" > "$OUT/$k.log"
  fi
done

echo "== time"; cat "$OUT/time.log"
for f in "$OUT"/rms_Y*.txt "$OUT"/wide.txt "$OUT"/hand.txt "$OUT"/softmax_O*.txt "$OUT"/fi_P1.txt; do
  [ -f "$f" ] && { echo "== $(basename "$f" .txt)"; tail -n 8 "$f"; }
done
for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -n 12 "$OUT/$k.log"; done
echo "wall ${SECONDS}s"
tar -czf "$OUT/s9_rows_time.tgz" -C "$OUT" --exclude cache --exclude stage --exclude '*.tgz' . 2>/dev/null
grep -q "rms_Y8_P2 rc=0" "$OUT/time.log"
