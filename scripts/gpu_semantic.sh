#!/usr/bin/env bash
# On a GPU host (python3 with cupy, numpy): evidence for the semantic passes (issue 5).
#   bash scripts/gpu_semantic.sh [verify|sol|tune|gains|all]     # from the repo root; results in $OUT
# verify  every config of vectorize, fast-math, warp-reduce, hoist, cache-hints, rows-per-block on
#         every kernel each applies to, verified against the references (harness, odd sizes,
#         no timing): pytest -m gpu tests/passes/test_semantic_gpu.py -> verify.jsonl, verify.log
# sol     act_and_mul_scalar and moe_sum_scalar at their largest shape: original, then
#         vectorize,block-size (whole grid), then cache-hints on the best -> sol.json
# tune    the same two baselines through `ktx tune` (the tuner; vectorize,block-size,cache-hints,
#         TPE/grid per shape) at their largest shape -> tune_<kernel>.json (summary, best, table)
# gains   silu_and_mul, fused_add_rmsnorm, merge_attn_states, shape by shape: best structural
#         config, then each semantic pass over it, and all together -> gains.json
# Env: KTX_SEM_KERNELS (sol/gains kernels, space-separated), KTX_SEM_ROUNDS / KTX_SEM_ODD_ROUNDS
# (verification rounds at the shape / per odd-size variant; default the spec's), KTX_SEM_SHAPES=quick|default (gains; default quick), KTX_SEM_TRIALS (structural configs per
# shape, 12), KTX_SEM_LIMIT (configs per semantic pass per shape, 12), KTX_SEMANTIC_GPU_LIMIT
# (configs per pass and kernel for verify, 24). Each phase fits in about 10 minutes on an H200
# (verify is the longest: about 470 verifications); run them as separate commands if a limit
# applies. Prints a short table last. Exit status: the first failing phase's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_semantic_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PHASE="${1:-all}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"

# ktx's own dependencies that the GPU image lacks travel as wheels in .whl (see gpu_env.sh).
if [ -d .whl ]; then source scripts/gpu_env.sh; fi

# Dry run on a CPU (tune phase): PYTHON=.venv/bin/python BACKEND=harness:tests/measure/fake_gpu.py:handle
if [ "${BACKEND:-cupy}" = cupy ]; then
  echo "== device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  "$PY" -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" || exit 2
fi

# Verification depth for sol and gains: every candidate is verified; at the largest shapes the
# comparisons on the CPU dominate, so the rounds can be lowered (KTX_SEM_ROUNDS, KTX_SEM_ODD_ROUNDS).
VERIFY_ARGS="--rounds ${KTX_SEM_ROUNDS:-0} --odd-rounds ${KTX_SEM_ODD_ROUNDS:-0}"
status=0
if [ "$PHASE" = verify ] || [ "$PHASE" = all ]; then
  echo "== verify (every config of every semantic pass)"
  rm -f "$OUT/verify.jsonl"
  KTX_SEMANTIC_JSON="$OUT/verify.jsonl" "$PY" -m pytest -q -m gpu -p no:cacheprovider \
    tests/passes/test_semantic_gpu.py 2>&1 | tee "$OUT/verify.log" | tail -15
  rc=${PIPESTATUS[0]}; [ $status -eq 0 ] && status=$rc
fi
if [ "$PHASE" = sol ] || [ "$PHASE" = all ]; then
  echo "== sol (scalar baselines after vectorize and tuning)"
  "$PY" scripts/gpu_semantic.py sol --out "$OUT" ${KTX_SEM_KERNELS:+--kernels $KTX_SEM_KERNELS} $VERIFY_ARGS 2> "$OUT/sol.err" > "$OUT/sol.txt"
  rc=$?; tail -3 "$OUT/sol.err"; [ $status -eq 0 ] && status=$rc
fi
if [ "$PHASE" = tune ] || [ "$PHASE" = all ]; then
  echo "== tune (ktx tune on the scalar baselines, largest shape)"
  RUNS="${RUNS:-/tmp/ktx-semantic-runs}"; mkdir -p "$RUNS"
  for spec in "act_and_mul_scalar tokens=4096,d=14336" "moe_sum_scalar tokens=4096,d=7168,topk=8"; do
    set -- $spec; k=$1; shape=$2; run="$RUNS/tune_$k"; rm -rf "$run"
    if [ -n "${KTX_SEM_KERNELS:-}" ] && [[ " $KTX_SEM_KERNELS " != *" $k "* ]]; then continue; fi
    "$PY" -m ktx tune "kernels/$k" --passes vectorize,block-size,cache-hints --shapes "$shape" \
      --trials "${KTX_SEM_TUNE_TRIALS:-40}" ${KTX_SEM_TUNE_SECONDS:+--time-limit $KTX_SEM_TUNE_SECONDS} --seed 1 --holdout none --backend "${BACKEND:-cupy}" \
      --out "$run" --quiet > "$run.txt" 2>&1
    rc=$?; tail -6 "$run.txt"; [ $status -eq 0 ] && status=$rc
    "$PY" - "$run" "$OUT/tune_$k.json" <<'PYEOF'
import json, sys
from pathlib import Path
run, out = Path(sys.argv[1]), Path(sys.argv[2])
data = {n: (json.loads((run / f"{n}.json").read_text()) if (run / f"{n}.json").exists() else None)
        for n in ("summary", "best", "dispatch")}
out.write_text(json.dumps(data, indent=1) + "\n")
PYEOF
  done
fi
if [ "$PHASE" = gains ] || [ "$PHASE" = all ]; then
  echo "== gains (each semantic pass over the structural-only best)"
  "$PY" scripts/gpu_semantic.py gains --out "$OUT" ${KTX_SEM_KERNELS:+--kernels $KTX_SEM_KERNELS} $VERIFY_ARGS --shapes "${KTX_SEM_SHAPES:-quick}" \
    --trials "${KTX_SEM_TRIALS:-12}" --limit "${KTX_SEM_LIMIT:-12}" 2> "$OUT/gains.err" > "$OUT/gains.txt"
  rc=$?; tail -3 "$OUT/gains.err"; [ $status -eq 0 ] && status=$rc
fi

echo "== summary"
if [ -f "$OUT/verify.jsonl" ]; then
  "$PY" - "$OUT/verify.jsonl" <<'PYEOF'
import json, sys
from collections import Counter
rows = [json.loads(line) for line in open(sys.argv[1])]
by = Counter((r["pass"], r["status"]) for r in rows)
passes = sorted({r["pass"] for r in rows})
print("verify: " + "  ".join(f"{p} {by[(p, 'ok')]}/{sum(v for (q, _), v in by.items() if q == p)}" for p in passes))
bad = [r for r in rows if r["status"] != "ok"]
for r in bad[:10]:
    print("  FAIL", r["pass"], r["kernel"], r["config"], r["shape"], r["status"], r["message"][:120])
PYEOF
fi
"$PY" scripts/gpu_semantic.py table --out "$OUT"
for f in "$OUT"/tune_*.json; do
  [ -f "$f" ] || continue
  "$PY" - "$f" <<'PYEOF'
import json, sys
data = json.load(open(sys.argv[1]))
rows = ((data.get("summary") or {}).get("shapes")) or []
for r in rows if isinstance(rows, list) else []:
    sol = r.get("sol_fraction")
    print(f"ktx tune {sys.argv[1].rsplit('tune_', 1)[1][:-5]:20} {r.get('shape'):28} "
          f"SoL {100 * sol if sol else 0:.0f}%  x{r.get('speedup') or 0:.2f}  {json.dumps(r.get('best_config'))}")
PYEOF
done
echo "exit=$status"
exit $status
