#!/usr/bin/env bash
# Issue 23's production norms at the budget the issue measured them with (`ktx optimize
# --planner rules --shapes rows --budget 160`), one kernel on one GPU, about 170 s:
#   OUT=/path bash scripts/gpu_s11_norms160.sh rmsnorm|fused_add_rmsnorm [BUDGET_S=160]
# (gpu_s11_norms.sh gives each kernel 76 s so that its paired harness fits one call beside it.)
# Writes $OUT/KERNEL.log (the run's summary: the paired final check per shape, the runoff notes)
# and $OUT/KERNEL.tgz (the run folder's json/jsonl/md, no source).
set -uo pipefail
cd "$(dirname "$0")/.."
K=$1; BUDGET=${2:-160}
OUT="${OUT:-$PWD/gpu_s11_norms160_out}"; mkdir -p "$OUT"
# shellcheck disable=SC1091
[ -n "${KTX_SKIP_ENV:-}" ] || source scripts/gpu_env.sh >/dev/null 2>&1
export PYTHONUNBUFFERED=1 KTX_CACHE_DIR="${KTX_CACHE_DIR:-/tmp/ktx-norms160-cache-$K}"
RUN=/tmp/ktx-norms160-$K; rm -rf "$RUN"
timeout $(( BUDGET + 40 )) python3 -m ktx optimize "kernels/$K" --planner rules --shapes rows --budget "$BUDGET" \
  --out "$RUN" --ncu off >"$OUT/$K.log" 2>&1
rc=$?
grep -h "Runoff:" "$RUN"/round-*/summary.md 2>/dev/null | sed 's/^/runoff: /' >>"$OUT/$K.log"
tar czf "$OUT/$K.tgz" --exclude='*.cu' --exclude='*.cuh' --exclude='*.h' --exclude='*.cubin' -C /tmp "$(basename "$RUN")"
grep -E "^\| [0-9]+ \||^\| tokens|^best:|^time" "$OUT/$K.log"
exit $rc
