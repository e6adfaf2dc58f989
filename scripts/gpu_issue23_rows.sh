#!/usr/bin/env bash
# On a 4-GPU host: evidence for issue 23 (online reductions, the planner rule). From the repo root:
#   source scripts/gpu_env.sh && bash scripts/gpu_issue23_rows.sh
# Four lanes side by side, one GPU each (GPU indices from CUDA_VISIBLE_DEVICES, default 0-3):
#   lane 0  verify: pytest -m gpu tests/passes/test_online_gpu.py (every ONLINE config of llm.c
#           softmax v1: alone, after row-owner at every THREADS_PER_ROW, with vectorize; odd
#           sizes, against the original) -> verify.log; then `ktx optimize` of kernels/rmsnorm at
#           its default shapes (the planner's stop message says why nothing else applies) -> rmsnorm/
#   lane 1  time: `ktx bench` of softmax v1 under row-owner,online at THREADS_PER_ROW 32/256/1024,
#           ONLINE 0 and 1, at the ladder shapes -> bench_T<t>_O<o>.{json,txt}, time.txt; then
#           `ktx optimize` of kernels/fused_add_rmsnorm -> fused_add_rmsnorm/
#   lanes 2-3  the llm.c ladder rows of softmax_forward and layernorm_forward (benchmarks/llmc/run.py,
#           rules planner, which now proposes online after row-owner; hand-written v7/online8 and
#           v3-v5 benched beside) -> ladder/results.md
# Every lane is capped so the script ends within 8 minutes. Results under $OUT, tarred as issue23.tgz.
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
  timeout 270 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/passes/test_online_gpu.py > "$OUT/verify.log" 2>&1
  echo "verify rc=$?" >> "$OUT/verify.log"
  timeout 200 "$PY" -m ktx optimize kernels/rmsnorm --planner rules --budget 180 --out "$OUT/rmsnorm" \
    > "$OUT/rmsnorm.log" 2>&1
  echo "rmsnorm rc=$?" >> "$OUT/rmsnorm.log"
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
      [ $((SECONDS - start)) -lt 200 ] || { echo "time budget spent before T=$t ONLINE=$o"; continue; }
      timeout 60 "$PY" -m ktx bench "$stage/softmax_forward-v1" --passes row-owner,online \
        --config "THREADS_PER_ROW=$t" --config "ONLINE=$o" --shapes ladder --reference python \
        --json "$OUT/bench_T${t}_O${o}.json" > "$OUT/bench_T${t}_O${o}.txt" 2>&1
      echo "T=$t ONLINE=$o rc=$?"
    done
  done > "$OUT/time.log" 2>&1
  for f in "$OUT"/bench_T*.txt; do echo "== $(basename "$f" .txt)"; tail -8 "$f"; done > "$OUT/time.txt"
  timeout 200 "$PY" -m ktx optimize kernels/fused_add_rmsnorm --planner rules --budget 180 \
    --out "$OUT/fused_add_rmsnorm" > "$OUT/fused_add_rmsnorm.log" 2>&1
  echo "fused_add_rmsnorm rc=$?" >> "$OUT/fused_add_rmsnorm.log"
}

lane23() {
  export CUDA_VISIBLE_DEVICES="${GPU[2]},${GPU[3]}"
  # run.py kills what still runs at --budget + 45 s
  timeout 440 "$PY" benchmarks/llmc/run.py --llmc "$LLMC" --kernels softmax_forward layernorm_forward \
    --budget 380 --gpus 2 --out "$OUT/ladder" > "$OUT/ladder.log" 2>&1
  echo "ladder rc=$?" >> "$OUT/ladder.log"
}

lane0 & p0=$!
lane1 & p1=$!
lane23 & p2=$!
wait $p0 $p1 $p2
echo "== verify"; tail -6 "$OUT/verify.log"
echo "== time (softmax v1, row-owner,online)"; cat "$OUT/time.txt"
echo "== ladder"; cat "$OUT/ladder/results.md" 2>/dev/null || tail -20 "$OUT/ladder.log"
for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -12 "$OUT/$k.log"; done
tar -czf "$OUT/issue23.tgz" -C "$OUT" --exclude cache --exclude stage --exclude issue23.tgz . 2>/dev/null
grep -q "verify rc=0" "$OUT/verify.log"
