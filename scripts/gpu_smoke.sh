#!/usr/bin/env bash
# On a GPU host (python3 with cupy, numpy): run the GPU tests and the suite benchmark.
#   bash scripts/gpu_smoke.sh            # from the repo root; results in $OUT (or ./gpu_smoke_out)
# About 9 minutes on an H200 (GPU tests 3, bench 5); KTX_BENCH_SHAPES=quick shortens the bench.
# Prints a short table last. Exit status: that of the tests, or of the bench if the tests passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_smoke_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"

# ktx's own dependencies that the GPU image lacks travel as wheels in .whl (see gpu_env.sh).
if [ -d .whl ]; then source scripts/gpu_env.sh; fi

echo "== device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" || exit 2
command -v nvcc >/dev/null && nvcc --version | tail -1

echo "== gpu tests"
"$PY" -m pytest -q -m gpu -p no:cacheprovider --durations=8 tests/measure tests/kernels 2>&1 | tee "$OUT/pytest.log"
tests=${PIPESTATUS[0]}

echo "== bench"
# KTX_BENCH_SHAPES=quick for a short run (the default sets take about 5 minutes on an H200).
"$PY" -m ktx bench kernels/ ${KTX_BENCH_SHAPES:+--shapes "$KTX_BENCH_SHAPES"} --json "$OUT/bench.json" 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
bench=${PIPESTATUS[0]}
tail -5 "$OUT/bench.err"

echo "== summary"
"$PY" - "$OUT/bench.json" <<'PYEOF'
import json, sys
from collections import defaultdict
data = json.load(open(sys.argv[1]))
print(f"{data.get('device')}  driver {data.get('driver')}  toolkit {data.get('toolkit')}")
rows = defaultdict(list)
for m in data["measurements"]:
    rows[m["kernel"]].append(m)
print(f"{'kernel':28} {'shapes':>6} {'ok':>4} {'graph us (min..max)':>22} {'SoL (median)':>13}")
for kernel, ms in sorted(rows.items()):
    ok = [m for m in ms if m["status"] == "ok"]
    g = sorted(m["graph"]["median_us"] for m in ok if m.get("graph"))
    sol = sorted(m["sol_fraction"] for m in ok if m.get("sol_fraction"))
    span = f"{g[0]:.2f}..{g[-1]:.2f}" if g else "-"
    med = f"{100 * sol[len(sol) // 2]:.0f}%" if sol else "-"
    print(f"{kernel:28} {len(ms):>6} {len(ok):>4} {span:>22} {med:>13}")
PYEOF
echo "tests exit=$tests bench exit=$bench"
[ "$tests" -eq 0 ] && exit "$bench" || exit "$tests"
