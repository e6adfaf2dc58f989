#!/usr/bin/env bash
# On a 4-GPU host: evidence for issue 23 items 1-4 (online reductions incl. Welford, one-pass rows
# in registers incl. llm.c's scalar rows, wide rows at decode over a cluster, the planner rules).
# From the repo root, with ../shared/llmc (or shared/llmc) carried:
#   source scripts/gpu_env.sh && bash scripts/gpu_issue23_rows.sh
# Four lanes side by side, one GPU each (GPU indices from CUDA_VISIBLE_DEVICES, default 0-3):
#   lane 0  verify every new config (pytest -m gpu, no timing):
#           tests/passes/test_online_gpu.py  - llm.c softmax v1 under online (alone, after
#             row-owner at every THREADS_PER_ROW, with vectorize); layernorm v1 and
#             fused_residual v2 under online's Welford pair (alone, after row-owner at every
#             THREADS_PER_ROW)                                            -> verify_online.log
#           tests/passes/test_row_registers_gpu.py - every PACKS of rmsnorm/fused_add_rmsnorm
#             (alone, after block-size); llm.c layernorm v1 and fused_residual v2 after
#             row-owner: every PACKS x THREADS_PER_ROW 1/32/256/1024      -> verify_row_registers.log
#           tests/passes/test_cluster_rows.py -k wide - block-size,cluster-rows,row-registers on
#             rmsnorm at 7 (BLOCK_Y, CLUSTER, PACKS) points, decode shapes; the hand variant
#             benchmarks/cluster_rows against the suite's reference     -> verify_cluster.log
#   lane 1  time, each number beside the original in the same ktx bench call:
#           softmax v1 under row-owner,online (T 32/1024 x ONLINE 0/1)   -> bench_T<t>_O<o>.*
#           layernorm v1 / fused_residual v2: row-owner,online (T 32/256 x ONLINE 0/1) and
#             row-owner,row-registers (T 32 P 32, T 128 P 8, T 256 P 4)  -> ln_*.*, fr_*.*
#           wide rows at decode: the hand cluster kernel (benchmarks/cluster_rows, shapes
#             decode) and rmsnorm under block-size,cluster-rows,row-registers at 6 points of
#             the same shapes (the original rmsnorm is timed beside each) -> hand.*, wide_*.*
#           rmsnorm under block-size,row-registers (BLOCK_Y, PACKS), default shapes -> rms_*.*
#           the tails of all in time.txt
#   lane 2  the llm.c ladder rows these passes affect: softmax_forward, layernorm_forward and
#           fused_residual_forward (benchmarks/llmc/run.py, rules planner, hand-written
#           versions benched beside)                                    -> ladder/
#   lane 3  `ktx optimize --planner rules` of kernels/rmsnorm and kernels/fused_add_rmsnorm at
#           their default shapes (row-registers and cluster-rows have rules) -> rmsnorm/, ...
# Every lane is capped so that the script ends within 9 minutes. Results under $OUT (issue23.tgz).
# The exit status is 0 when every verification log ends with rc=0.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_issue23_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
if [ -d .whl ]; then source scripts/gpu_env.sh; fi
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
IFS=, read -r -a GPU <<< "${CUDA_VISIBLE_DEVICES:-0,1,2,3}"
[ "${#GPU[@]}" -ge 4 ] || { echo "error: 4 GPUs needed, CUDA_VISIBLE_DEVICES names ${#GPU[@]}" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true

lane0() {
  export CUDA_VISIBLE_DEVICES="${GPU[0]}"
  timeout 200 "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly tests/passes/test_online_gpu.py \
    > "$OUT/verify_online.log" 2>&1
  echo "verify online rc=$?" >> "$OUT/verify_online.log"
  timeout 170 "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly tests/passes/test_row_registers_gpu.py \
    > "$OUT/verify_row_registers.log" 2>&1
  echo "verify row-registers rc=$?" >> "$OUT/verify_row_registers.log"
  timeout 90 "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly tests/passes/test_cluster_rows.py \
    -k wide > "$OUT/verify_cluster.log" 2>&1
  echo "verify cluster rc=$?" >> "$OUT/verify_cluster.log"
}

# bench NAME DIR PIPELINE CONFIG... : one ktx bench call, its tail kept; skipped past the lane's cap
LANE1_END=$((SECONDS + 430))
bench() {
  local name=$1 dir=$2 passes=$3; shift 3
  [ "$SECONDS" -lt "$LANE1_END" ] || { echo "$name: skipped, lane time spent"; return; }
  local args=()
  for c in "$@"; do args+=(--config "$c"); done
  [ -n "$passes" ] && args+=(--passes "$passes")
  timeout 60 "$PY" -m ktx bench "$dir" "${args[@]}" ${SHAPES:+--shapes "$SHAPES"} ${REF:+--reference "$REF"} \
    --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$?"
}

lane1() {
  export CUDA_VISIBLE_DEVICES="${GPU[1]}"
  local stage="$OUT/stage"
  "$PY" - "$LLMC/dev/cuda" "$stage" <<'PYEOF' > "$OUT/stage.log" 2>&1
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("llmc_run", "benchmarks/llmc/run.py")
run = importlib.util.module_from_spec(spec); sys.modules["llmc_run"] = run; spec.loader.exec_module(run)
for name in ("softmax_forward", "layernorm_forward", "fused_residual_forward"):
    lad = next(l for l in run.LADDERS if l.name == name)
    print(run.stage(lad, lad.naive, Path(sys.argv[1]), Path(sys.argv[2])))
PYEOF
  {
    # softmax v1 (its naive original takes tens of ms: the Python reference verifies)
    for t in 32 1024; do for o in 0 1; do
      SHAPES=ladder REF=python bench "bench_T${t}_O${o}" "$stage/softmax_forward-v1" row-owner,online \
        "THREADS_PER_ROW=$t" "ONLINE=$o"
    done; done
    # layernorm v1 and fused_residual v2: Welford, then the row in registers
    for k in ln:layernorm_forward-v1 fr:fused_residual_forward-v2; do
      p=${k%%:*}; d="$stage/${k#*:}"
      for t in 32 256; do for o in 0 1; do
        SHAPES=ladder bench "${p}_online_T${t}_O${o}" "$d" row-owner,online "THREADS_PER_ROW=$t" "ONLINE=$o"
      done; done
      for tp in 32:32 128:8 256:4; do
        SHAPES=ladder bench "${p}_regs_T${tp%:*}_P${tp#*:}" "$d" row-owner,row-registers \
          "THREADS_PER_ROW=${tp%:*}" "PACKS=${tp#*:}"
      done
    done
    # wide rows at decode: the hand variant, then the pass's points (BLOCK_Y, CLUSTER, PACKS)
    SHAPES=decode bench hand benchmarks/cluster_rows ""
    for ycp in 4:8:1 8:4:1 4:4:2 8:8:1 0:8:0 4:1:2; do
      IFS=: read -r y c p <<< "$ycp"
      SHAPES=decode bench "wide_Y${y}_C${c}_P${p}" kernels/rmsnorm block-size,cluster-rows,row-registers \
        "BLOCK_Y=$y" "CLUSTER=$c" "PACKS=$p"
    done
    # d=4096 bf16 is 512 packs of 8: 16 warps (the launcher's) hold one pack a thread, 4 warps 4
    for yp in 0:1 4:4 8:2; do
      SHAPES=default bench "rms_Y${yp%:*}_P${yp#*:}" kernels/rmsnorm block-size,row-registers \
        "BLOCK_Y=${yp%:*}" "PACKS=${yp#*:}"
    done
  } > "$OUT/time.log" 2>&1
  for f in "$OUT"/bench_T*.txt "$OUT"/ln_*.txt "$OUT"/fr_*.txt "$OUT"/hand.txt "$OUT"/wide_*.txt \
    "$OUT"/rms_Y*.txt; do
    [ -f "$f" ] && { echo "== $(basename "$f" .txt)"; tail -14 "$f"; }
  done > "$OUT/time.txt"
}

lane2() {
  export CUDA_VISIBLE_DEVICES="${GPU[2]}"
  # run.py kills what still runs at --budget + 45 s
  timeout 500 "$PY" benchmarks/llmc/run.py --llmc "$LLMC" \
    --kernels softmax_forward layernorm_forward fused_residual_forward \
    --budget 440 --gpus 1 --out "$OUT/ladder" > "$OUT/ladder.log" 2>&1
  echo "ladder rc=$?" >> "$OUT/ladder.log"
}

lane3() {
  export CUDA_VISIBLE_DEVICES="${GPU[3]}"
  for k in rmsnorm fused_add_rmsnorm; do
    timeout 245 "$PY" -m ktx optimize "kernels/$k" --planner rules --budget 230 --out "$OUT/$k" \
      > "$OUT/$k.log" 2>&1
    echo "$k rc=$?" >> "$OUT/$k.log"
  done
}

lane0 & p0=$!
lane1 & p1=$!
lane2 & p2=$!
lane3 & p3=$!
wait $p0 $p1 $p2 $p3
echo "== verify"; tail -4 "$OUT/verify_online.log" "$OUT/verify_row_registers.log" "$OUT/verify_cluster.log"
echo "== time"; cat "$OUT/time.txt"
echo "== ladder"; cat "$OUT/ladder/results.md" 2>/dev/null || tail -20 "$OUT/ladder.log"
for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -12 "$OUT/$k.log"; done
tar -czf "$OUT/issue23.tgz" -C "$OUT" --exclude cache --exclude stage --exclude issue23.tgz . 2>/dev/null
grep -q "online rc=0" "$OUT/verify_online.log" && grep -q "row-registers rc=0" "$OUT/verify_row_registers.log" \
  && grep -q "cluster rc=0" "$OUT/verify_cluster.log"
