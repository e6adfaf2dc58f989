#!/usr/bin/env bash
# s9-passbugs GPU evidence (one GPU, under 4 minutes): the candidates session 9's real-code run
# measured as wrong_result/crash, after the pass fixes of branch s9-passbugs.
#
#   1. vectorAdd: expose's THREADS_PER_BLOCK = 64, 128, 512 now move the spec's grid
#      ((50000 + B - 1) // B); each must verify (it was wrong_result at 64 and 128);
#   2. the refused sites: the pipelines that produced the failures now offer no such knob, so
#      `ktx run --config` with the old knob must fail with exit 2 (unknown knob), not measure:
#      histogram256 PARTIAL_HISTOGRAM256_COUNT, uniform_add N_ELEMENTS, scalarProduct BLOCK_X,
#      top_k_gating ROWS, FusedAddRMSNorm NUM_WARPS (the last four the passes' refusals; CPU-checkable, here for the record).
#
# Carry benchmarks/realcode/src (ignored) and the wheels scripts/gpu_env.sh expects.
# Usage on the GPU host, repo root:  OUT=/path bash scripts/gpu_s9_passbugs.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_s9_passbugs_out}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
KTX="${KTX:-ktx}"
RC=benchmarks/realcode
LOG="$OUT/passbugs.log"
: >"$LOG"
for b in 64 128 256 512; do
  echo "== vectorAdd expose THREADS_PER_BLOCK=$b" | tee -a "$LOG"
  timeout 60 $KTX run "$RC/cuda-samples__vectorAdd" --passes expose --config "THREADS_PER_BLOCK=$b" \
    --json "$OUT/vectorAdd_$b.json" >>"$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
done
for case in "cuda-samples__histogram256Kernel expose PARTIAL_HISTOGRAM256_COUNT=128" \
            "cuda-samples__uniform_add expose N_ELEMENTS=32768" \
            "cuda-samples__scalarProductKernel_native block-size BLOCK_X=256" \
            "deepspeed__top_k_gating_kernel rows-per-block ROWS=2" \
            "flashinfer__FusedAddRMSNormKernel expose NUM_WARPS=128"; do
  set -- $case
  echo "== $1 $2 $3 (expect exit 2: the knob is refused)" | tee -a "$LOG"
  timeout 60 $KTX run "$RC/$1" --passes "$2" --config "$3" >>"$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
done
grep -E "^(==|rc=)" "$LOG"
