#!/usr/bin/env bash
# Session 10, s10-norms: GPU evidence for issue 23 items 2-3 (production norms) on ONE GPU, one call
# under 4 minutes (steps in order of value, each capped, skipped once 225 s are spent). From the
# repo root:  source scripts/gpu_env.sh && bash scripts/gpu_s10_norms.sh
#   1 verify: every PACKS config of row-registers on kernels/rmsnorm and kernels/fused_add_rmsnorm,
#     alone and after block-size (BLOCK_Y 1/4/8/32); fused_add_rmsnorm's stashed sum is now kept in
#     registers (new this session)                                   -> verify.log
#   2 the hand variants (benchmarks/norms_hand, 1/2/4 packs a thread) and the pass's configs of the
#     same form, each `ktx bench` timing the original beside it, at the goal shapes `rows`
#     (tokens=1,d=8192; 1024,4096; 4096,4096)                        -> hand_*.txt, rms_*.txt, fa_*.txt
#     and FlashInfer's FusedAddRMSNormKernel at PACKS 1/2 when benchmarks/realcode/src is carried -> fi_fa_*.txt
#   3 ktx optimize --planner rules, shapes `rows`, for both kernels (the paired final check against
#     the original: the goal's measure), the time left split between them -> rmsnorm/, fused_add_rmsnorm/
# Results under $OUT (s10_norms.tgz). Exit status 0 when the verify step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s10_norms_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export KTX_CACHE_DIR="${KTX_CACHE_DIR:-$OUT/cache}"
END=$((SECONDS + 225))
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader || true
git log --oneline -1 2>/dev/null || true

cap() { local left=$((END - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"; }

# bench NAME DIR SHAPES PIPELINE CONFIG... : one ktx bench call (the original timed beside it)
bench() {
  local name=$1 dir=$2 shapes=$3 passes=$4; shift 4
  local t; t=$(cap "${BCAP:-25}")
  [ "$t" -gt 5 ] || { echo "$name: skipped, budget spent"; return; }
  local args=()
  for c in "$@"; do args+=(--config "$c"); done
  [ -n "$passes" ] && args+=(--passes "$passes")
  timeout "$t" "$PY" -m ktx bench "$dir" "${args[@]}" --shapes "$shapes" --json "$OUT/$name.json" \
    > "$OUT/$name.txt" 2>&1
  echo "$name rc=$?"
}

# 1 verify
timeout "$(cap 70)" "$PY" -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
  tests/passes/test_row_registers_gpu.py -k every_packs > "$OUT/verify.log" 2>&1
echo "verify rc=$?" >> "$OUT/verify.log"
tail -n 3 "$OUT/verify.log"

# 2 hand variants and the pass's configs of their form
{
  BCAP=35 bench hand_rms benchmarks/norms_hand/rmsnorm goal ""
  BCAP=35 bench hand_fa benchmarks/norms_hand/fused_add_rmsnorm goal ""
  bench rms_Y8_P2 kernels/rmsnorm rows block-size,row-registers BLOCK_Y=8 PACKS=2
  bench rms_Y16_P2 kernels/rmsnorm rows block-size,row-registers BLOCK_Y=16 PACKS=2
  bench fa_Y8_P2 kernels/fused_add_rmsnorm rows block-size,row-registers BLOCK_Y=8 PACKS=2
  bench fa_Y16_P2 kernels/fused_add_rmsnorm rows block-size,row-registers BLOCK_Y=16 PACKS=2
  bench fa_Y4_P4 kernels/fused_add_rmsnorm rows block-size,row-registers BLOCK_Y=4 PACKS=4
  # real code: FlashInfer's FusedAddRMSNormKernel, its x_vec stash now kept (needs
  # benchmarks/realcode/src carried: benchmarks/realcode/fetch.py)
  if [ -d benchmarks/realcode/src/flashinfer ]; then
    bench fi_fa_P1 benchmarks/realcode/flashinfer__FusedAddRMSNormKernel default row-registers PACKS=1
    bench fi_fa_P2 benchmarks/realcode/flashinfer__FusedAddRMSNormKernel default row-registers PACKS=2
  else
    echo "fi_fa: skipped, benchmarks/realcode/src not carried"
  fi
} > "$OUT/time.log" 2>&1

# 3 optimize both norms at a fixed budget (the time left, split between the two)
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

echo "== time"; cat "$OUT/time.log"
for f in "$OUT"/hand_*.txt "$OUT"/rms_*.txt "$OUT"/fa_*.txt "$OUT"/fi_fa_*.txt; do
  [ -f "$f" ] && { echo "== $(basename "$f" .txt)"; tail -n 22 "$f"; }
done
for k in rmsnorm fused_add_rmsnorm; do echo "== optimize $k"; tail -n 12 "$OUT/$k.log"; done
echo "wall ${SECONDS}s"
tar -czf "$OUT/s10_norms.tgz" -C "$OUT" --exclude cache --exclude '*.tgz' . 2>/dev/null
grep -q "verify rc=0" "$OUT/verify.log"
