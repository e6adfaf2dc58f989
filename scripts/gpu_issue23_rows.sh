#!/usr/bin/env bash
# On a 4-GPU host: evidence for issue 23 (online reductions, one-pass rows, the planner rules).
# From the repo root:
#   source scripts/gpu_env.sh && bash scripts/gpu_issue23_rows.sh
# Four lanes side by side, one GPU each (GPU indices from CUDA_VISIBLE_DEVICES, default 0-3):
#   lane 0  verify: pytest -m gpu tests/passes/test_online_gpu.py (every ONLINE config of llm.c
#           softmax v1: alone, after row-owner at every THREADS_PER_ROW, with vectorize) and
#           tests/passes/test_row_registers_gpu.py (every PACKS config of rmsnorm and
#           fused_add_rmsnorm at every default shape, alone and after block-size) -> verify_*.log
#   lane 1  time: `ktx bench` of softmax v1 under row-owner,online (THREADS_PER_ROW 32/256/1024,
#           ONLINE 0 and 1, ladder shapes) -> bench_T<t>_O<o>.*; rmsnorm under
#           block-size,row-registers (BLOCK_Y, PACKS pairs; default shapes, d 4096 and 8192)
#           -> rms_Y<y>_P<p>.*; the tails in time.txt
#   lane 2  the llm.c ladder rows of softmax_forward and layernorm_forward (benchmarks/llmc/run.py,
#           rules planner: online after row-owner; hand-written versions benched beside) -> ladder/
#   lane 3  `ktx optimize --planner rules` of kernels/rmsnorm and kernels/fused_add_rmsnorm at their
#           default shapes (row-registers has a rule now) -> rmsnorm/, fused_add_rmsnorm/
# Every lane is capped so that the script ends within 8 minutes. Results under $OUT (issue23.tgz).
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
  timeout 270 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/passes/test_online_gpu.py \
    > "$OUT/verify_online.log" 2>&1
  echo "verify online rc=$?" >> "$OUT/verify_online.log"
  timeout 180 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/passes/test_row_registers_gpu.py \
    > "$OUT/verify_row_registers.log" 2>&1
  echo "verify row-registers rc=$?" >> "$OUT/verify_row_registers.log"
}

lane1() {
  export CUDA_VISIBLE_DEVICES="${GPU[1]}"
  local stage="$OUT/stage"
  "$PY" - "$LLMC/dev/cuda" "$stage" <<'PYEOF' > "$OUT/stage.log" 2>&1
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("llmc_run", "benchmarks/llmc/run.py")
run = importlib.util.module_from_spec(spec); sys.modules["llmc_run"] = run; spec.loader.exec_module(run)
lad = next(l for l in run.LADDERS if l.name == "softmax_forward")
print(run.stage(lad, lad.naive, Path(sys.argv[1]), Path(sys.argv[2])))
PYEOF
  local start=$SECONDS
  for t in 32 256 1024; do
    for o in 0 1; do
      [ $((SECONDS - start)) -lt 170 ] || { echo "time budget spent before T=$t ONLINE=$o"; continue; }
      timeout 60 "$PY" -m ktx bench "$stage/softmax_forward-v1" --passes row-owner,online \
        --config "THREADS_PER_ROW=$t" --config "ONLINE=$o" --shapes ladder --reference python \
        --json "$OUT/bench_T${t}_O${o}.json" > "$OUT/bench_T${t}_O${o}.txt" 2>&1
      echo "softmax T=$t ONLINE=$o rc=$?"
    done
  done > "$OUT/time.log" 2>&1
  # d=4096 bf16 is 512 packs of 8: 16 warps (the launcher's) hold one pack a thread, 4 warps
  # hold 4, 8 warps 2 (at d=8192 half the row stays in registers, the rest loops as written)
  start=$SECONDS
  for yp in 0:0 0:1 4:0 4:4 8:0 8:2; do
    y=${yp%:*}; p=${yp#*:}
    [ $((SECONDS - start)) -lt 200 ] || { echo "time budget spent before BLOCK_Y=$y PACKS=$p"; continue; }
    timeout 60 "$PY" -m ktx bench kernels/rmsnorm --passes block-size,row-registers \
      --config "BLOCK_Y=$y" --config "PACKS=$p" --shapes default \
      --json "$OUT/rms_Y${y}_P${p}.json" > "$OUT/rms_Y${y}_P${p}.txt" 2>&1
    echo "rmsnorm BLOCK_Y=$y PACKS=$p rc=$?"
  done >> "$OUT/time.log" 2>&1
  for f in "$OUT"/bench_T*.txt "$OUT"/rms_Y*.txt; do echo "== $(basename "$f" .txt)"; tail -8 "$f"; done \
    > "$OUT/time.txt"
}

lane2() {
  export CUDA_VISIBLE_DEVICES="${GPU[2]}"
  # run.py kills what still runs at --budget + 45 s
  timeout 440 "$PY" benchmarks/llmc/run.py --llmc "$LLMC" --kernels softmax_forward layernorm_forward \
    --budget 380 --gpus 1 --out "$OUT/ladder" > "$OUT/ladder.log" 2>&1
  echo "ladder rc=$?" >> "$OUT/ladder.log"
}

lane3() {
  export CUDA_VISIBLE_DEVICES="${GPU[3]}"
  for k in rmsnorm fused_add_rmsnorm; do
    timeout 215 "$PY" -m ktx optimize "kernels/$k" --planner rules --budget 200 --out "$OUT/$k" \
      > "$OUT/$k.log" 2>&1
    echo "$k rc=$?" >> "$OUT/$k.log"
  done
}

lane0 & p0=$!
lane1 & p1=$!
lane2 & p2=$!
lane3 & p3=$!
wait $p0 $p1 $p2 $p3
echo "== verify"; tail -4 "$OUT/verify_online.log" "$OUT/verify_row_registers.log"
echo "== time"; cat "$OUT/time.txt"
echo "== ladder"; cat "$OUT/ladder/results.md" 2>/dev/null || tail -20 "$OUT/ladder.log"
for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -12 "$OUT/$k.log"; done
tar -czf "$OUT/issue23.tgz" -C "$OUT" --exclude cache --exclude stage --exclude issue23.tgz . 2>/dev/null
grep -q "online rc=0" "$OUT/verify_online.log" && grep -q "row-registers rc=0" "$OUT/verify_row_registers.log"
