#!/usr/bin/env bash
# On a GPU host (python3.12 with cupy and numpy): `ktx optimize` with the rules planner on every
# suite kernel, twice (seeds 0 and 1), within a total wall budget in seconds (default 540).
#   bash scripts/gpu_optimize.sh 540          # from the repo root; results in $OUT
# Writes $OUT/summary.json, $OUT/runs.tar.gz (the run folders: `tar xzf` then `ktx report runs/K-s0`)
# and $OUT/optimize.log; prints a short table last. One run per GPU at a time (GPUS=N to limit).
# Knobs: KERNELS="a b", SEEDS="0 1", SHAPES=quick, ROUNDS=4, TRIALS=16, NCU=off, NCU_CHECK=1.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-540}"
export OUT="${OUT:-$PWD/gpu_optimize_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-/tmp/ktx-gpu-optimize/compile-cache}"

# ktx's own dependencies that the GPU image lacks travel as wheels in .whl (see gpu_env.sh).
if [ -d .whl ]; then source scripts/gpu_env.sh; fi

echo "== device"; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c "import cupy, numpy, optuna; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'optuna', optuna.__version__)" || exit 2
command -v ncu >/dev/null && echo "ncu: $(ncu --version | tail -1)"
echo "== optimize (budget ${BUDGET} s)"
exec "$PY" scripts/gpu_optimize.py "$BUDGET"
