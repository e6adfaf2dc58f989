#!/usr/bin/env bash
# Session 10, s10-norms: GPU evidence for issue 23 items 2-3 (production norms) on ONE GPU. Two
# modes, each one call under 4 minutes (steps capped, skipped once 225 s are spent). From the repo
# root (benchmarks/realcode/src carried for the FlashInfer step):
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_norms.sh paired     # (default) steps 1-3
#   source scripts/gpu_env.sh && bash scripts/gpu_s10_norms.sh optimize   # step 4
#   1 verify: every PACKS config of row-registers on kernels/rmsnorm and kernels/fused_add_rmsnorm,
#     alone and after block-size (BLOCK_Y 1/4/8/32), with the spec's odd sizes; fused_add_rmsnorm's
#     stashed sum kept in registers and its loads issued first are new this session -> verify.log
#   2 paired timing at the goal shapes (`rows`: tokens=1,d=8192; 1024,4096; 4096,4096) in ONE
#     harness per kernel: the original against block-size,row-registers at the configs that hold
#     the row in 1-4 packs a thread, and against the hand kernels (benchmarks/norms_hand, 1/2/4
#     packs) as candidates of the same spec; each verified first, then A B A B pairs
#     (scripts/s10_norms_paired.py)                                   -> paired/paired.{md,json}
#   3 FlashInfer's FusedAddRMSNormKernel (its x_vec stash kept, its loads first) under row-registers
#     PACKS 1 / 2, `ktx bench` beside the original, its default shapes   -> fi_fa_P*.txt
#   4 ktx optimize --planner rules, shapes `rows`, both kernels, ~108 s each (the paired final check
#     against the original is the goal's measure)                     -> rmsnorm/, fused_add_rmsnorm/
# Results under $OUT (s10_norms_<mode>.tgz). Exit status 0 when the mode's main step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s10_norms_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
MODE="${1:-paired}"
case "$MODE" in paired|optimize) ;; *) echo "usage: $0 [paired|optimize]" >&2; exit 2 ;; esac
END=$((SECONDS + 225))
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true

cap() { local left=$((END - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"; }

if [ "$MODE" = optimize ]; then
  for k in rmsnorm fused_add_rmsnorm; do
    if [ "$k" = rmsnorm ]; then t=$(((END - SECONDS) / 2)); else t=$((END - SECONDS)); fi
    if [ "$t" -gt 25 ]; then
      timeout "$t" "$PY" -m ktx optimize "kernels/$k" --planner rules --shapes rows --budget $((t - 8)) \
        --out "$OUT/$k" > "$OUT/$k.log" 2>&1
      echo "$k rc=$?" >> "$OUT/$k.log"
    else
      echo "$k: skipped, budget spent" > "$OUT/$k.log"
    fi
  done
  for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -n 14 "$OUT/$k.log"; done
  echo "wall ${SECONDS}s"
  tar -czf "$OUT/s10_norms_optimize.tgz" -C "$OUT" --exclude cache --exclude '*.tgz' . 2>/dev/null
  grep -q "rmsnorm rc=0" "$OUT/rmsnorm.log" && grep -q "fused_add_rmsnorm rc=0" "$OUT/fused_add_rmsnorm.log"
  exit
fi

# 1 verify
timeout "$(cap 75)" "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
  tests/passes/test_row_registers_gpu.py -k every_packs > "$OUT/verify.log" 2>&1
echo "verify rc=$?" >> "$OUT/verify.log"
tail -n 3 "$OUT/verify.log"

# 2 paired, the hand kernels in the same harness
t=$(cap 120)
if [ "$t" -gt 20 ]; then
  timeout "$t" "$PY" scripts/s10_norms_paired.py --out "$OUT/paired" --budget $((t - 15)) \
    > "$OUT/paired.log" 2>&1
  echo "paired rc=$?" >> "$OUT/paired.log"
fi

# 3 FlashInfer's fused add (needs benchmarks/realcode/src carried: benchmarks/realcode/fetch.py)
for p in 1 2; do
  t=$(cap 25)
  if [ -d benchmarks/realcode/src/flashinfer ] && [ "$t" -gt 5 ]; then
    timeout "$t" "$PY" -m ktx bench benchmarks/realcode/flashinfer__FusedAddRMSNormKernel \
      --passes row-registers --config PACKS=$p --json "$OUT/fi_fa_P$p.json" > "$OUT/fi_fa_P$p.txt" 2>&1
    echo "fi_fa_P$p rc=$?" >> "$OUT/fi_fa_P$p.txt"
  else
    echo "fi_fa_P$p: skipped (no benchmarks/realcode/src, or budget spent)" > "$OUT/fi_fa_P$p.txt"
  fi
done

echo "== paired"; cat "$OUT/paired/paired.md" 2>/dev/null || tail -n 20 "$OUT/paired.log"
for f in "$OUT"/fi_fa_P*.txt; do echo "== $(basename "$f" .txt)"; tail -n 10 "$f"; done
echo "wall ${SECONDS}s"
tar -czf "$OUT/s10_norms_paired.tgz" -C "$OUT" --exclude cache --exclude '*.tgz' . 2>/dev/null
grep -q "verify rc=0" "$OUT/verify.log"
