#!/usr/bin/env bash
# On a GPU host: evidence for row-owner (issue 11, part 3). From the repo root:
#   source scripts/gpu_env.sh && bash scripts/gpu_row_owner.sh [verify|time|all]
# verify  pytest -m gpu tests/passes/test_row_owner_gpu.py: every THREADS_PER_ROW config of llm.c's
#         layernorm/softmax kernel1 (alone, + vectorize, + unroll) and encoder v1 / fused_residual v2
#         verified against the original by the harness (odd sizes, no timing) -> verify.log
# time    `ktx bench` of layernorm v1 and softmax v1 (staged as benchmarks/llmc/run.py stages them)
#         under row-owner at THREADS_PER_ROW = 1 (the original), 32, 128, 512, 1024, at each spec's
#         quick shape (rows = 1024 / 8192, C = 768), original and config side by side, verified
#         against the Python reference -> bench_<kernel>_<T>.json/.txt and the tables (time.txt).
# About 2 minutes (verify) + 4 minutes (time) on an H100. Results under $OUT, tarred as row_owner.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_row_owner_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PHASE="${1:-all}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
if [ -d .whl ]; then source scripts/gpu_env.sh; fi
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
status=0
if [ "$PHASE" = verify ] || [ "$PHASE" = all ]; then
  echo "== verify"
  "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/passes/test_row_owner_gpu.py 2>&1 | tee "$OUT/verify.log" | tail -15
  rc=${PIPESTATUS[0]}; [ $status -eq 0 ] && status=$rc
fi
if [ "$PHASE" = time ] || [ "$PHASE" = all ]; then
  echo "== time"
  STAGE="$OUT/stage"
  "$PY" - "$LLMC/dev/cuda" "$STAGE" <<'PYEOF'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("llmc_run", "benchmarks/llmc/run.py")
run = importlib.util.module_from_spec(spec); sys.modules["llmc_run"] = run; spec.loader.exec_module(run)
for lad in run.LADDERS:
    if lad.name in ("layernorm_forward", "softmax_forward"):
        print(run.stage(lad, lad.naive, Path(sys.argv[1]), Path(sys.argv[2])))
PYEOF
  for k in layernorm_forward softmax_forward; do
    shapes=quick
    for t in 1 32 128 512 1024; do
      timeout 240 "$PY" -m ktx bench "$STAGE/$k-v1" --passes row-owner --config "THREADS_PER_ROW=$t" \
        --shapes "$shapes" --reference python --json "$OUT/bench_${k}_$t.json" > "$OUT/bench_${k}_$t.txt" 2>&1
      rc=$?; echo "$k T=$t rc=$rc"; [ $rc -ne 0 ] && tail -5 "$OUT/bench_${k}_$t.txt"
      [ $status -eq 0 ] && status=$rc
    done
  done
  for f in "$OUT"/bench_*.txt; do echo "== $(basename "$f" .txt)"; tail -12 "$f"; done | tee "$OUT/time.txt"
fi
tar -czf "$OUT/row_owner.tgz" -C "$OUT" --exclude cache --exclude stage --exclude row_owner.tgz . 2>/dev/null
exit $status
