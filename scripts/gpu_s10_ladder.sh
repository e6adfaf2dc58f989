#!/usr/bin/env bash
# Session 10, s10-ladder: GPU evidence for issue 23 (the llm.c ladder's layernorm, fused_residual
# and encoder cells; merge_attn_states' headroom) on ONE GPU, each mode one call under 4 minutes.
# From the repo root, with shared/llmc carried (cp -a /work/shared/llmc shared/llmc):
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_ladder.sh paired   # (default)
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_ladder.sh ladder
# paired: scripts/gpu_s10_ladder.py (its docstring says how): every candidate verified against the
#   Python reference, then ktx's config and the hand kernel timed alternately in one worker,
#   7 pairs, ratio ktx / hand with its 95% interval, single-launch and graph:
#     layernorm B=1/8/32: session 9's row-owner config, and row-owner,vectorize at VEC_LOOPS=4
#       (what the new search steps measure first in the vectorize round), against v5/v3/v4;
#     fused_residual B=1/8/32: session 9's row-owner,vectorize against v4;
#     merge_attn_states at 6 of its 15 shapes: the hand variant (benchmarks/merge_hand, PACKS 2)
#       and the traffic probe (not a merge: the floor for its bytes) against the suite kernel;
#     fused_residual: row-owner,online,vectorize (two passes over the row, as v4 makes; online's
#       Welford loop stays scalar: vectorize refuses its running shift) against v4;
#     layernorm: row-owner,row-registers with the whole row kept (PACKS 32 at 32 threads, 4 at
#       256), what the row-registers round now measures first, against v5/v3/v4;
#     encoder B=1: session 9's 128 threads x VEC 4, and 128 x VEC 8, against v3;
#     merge_attn_states: the hand variant at PACKS 1.
#   Cells are skipped once 200 s are spent (paired.md says which).
#                                                              -> paired/paired.{md,json}
# (scripts/gpu_calls.sh runs it with no argument: paired; its issue23 mode's full ladder covers `ladder`)
# ladder: ktx optimize --planner rules of llm.c layernorm v1 at the ladder's share (164 s of
#   --budget 470), shapes ladder: which round reaches which config now that a round measures the
#   new knob's steps at the best config first (ktx.agent.search.sweep_new_knobs)
#                                                              -> layernorm/, layernorm.log
# Results under $OUT (s10_ladder_<mode>.tgz). Exit status 0 when the mode's runs ended cleanly.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s10_ladder_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
LLMC="${LLMC:-shared/llmc}"
[ -f "$LLMC/dev/cuda/common.h" ] || LLMC=../shared/llmc
MODE="${1:-paired}"
case "$MODE" in paired|ladder) ;; *) echo "usage: $0 [paired|ladder]" >&2; exit 2 ;; esac
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true

if [ "$MODE" = paired ]; then
  timeout 228 "$PY" scripts/gpu_s10_ladder.py --llmc "$LLMC" --out "$OUT/paired" --deadline-s 200 \
    > "$OUT/paired.log" 2>&1
  rc=$?
  echo "paired rc=$rc" >> "$OUT/paired.log"
  cat "$OUT/paired/paired.md" 2>/dev/null || tail -n 30 "$OUT/paired.log"
  # the last lines (what a caller's tail shows): per kernel and side A, the geomean of A / B, single
  "$PY" - "$OUT/paired/paired.json" <<'PYEOF' || true
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
cells = {}
for r in rows:
    iv = (r.get("single") or {}).get("a_over_b")
    cells.setdefault((r["kernel"].split("/")[-1], r.get("a", "")), []).append(iv["estimate"] if iv else None)
for (k, a), v in cells.items():
    got = [x for x in v if x]
    g = math.exp(sum(map(math.log, got)) / len(got)) if got else float("nan")
    print(f"{k} | {a} | single A/B geomean {g:.3f} over {len(got)}/{len(v)} shapes")
PYEOF
  echo "wall ${SECONDS}s"
  tar -czf "$OUT/s10_ladder_paired.tgz" -C "$OUT" --exclude cache --exclude stage --exclude '*.tgz' . 2>/dev/null
  exit "$rc"
fi

# ladder: layernorm v1 staged as run.py stages it, then ktx optimize at its ladder share
stage="$OUT/stage"
"$PY" - "$LLMC" "$stage" <<'PYEOF'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("llmc_run", "benchmarks/llmc/run.py")
run = importlib.util.module_from_spec(spec); sys.modules["llmc_run"] = run; spec.loader.exec_module(run)
lad = next(l for l in run.LADDERS if l.name == "layernorm_forward")
print(run.stage(lad, lad.naive, run.llmc_cuda_dir(sys.argv[1]), Path(sys.argv[2])))
PYEOF
timeout 225 "$PY" -m ktx optimize "$stage/layernorm_forward-v1" --planner rules --shapes ladder --budget 164 \
  --ncu off --backend cupy --seed 0 --out "$OUT/layernorm" > "$OUT/layernorm.log" 2>&1
rc=$?
echo "layernorm rc=$rc" >> "$OUT/layernorm.log"
tail -n 30 "$OUT/layernorm.log"
echo "wall ${SECONDS}s"
tar -czf "$OUT/s10_ladder_ladder.tgz" -C "$OUT" --exclude cache --exclude stage --exclude '*.tgz' . 2>/dev/null
exit "$rc"
