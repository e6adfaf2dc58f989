#!/usr/bin/env bash
# The last GPU call of session 1: the production shapes with one-launch-at-a-time timing, then a
# time-boxed `ktx tune` of the three reference kernels with the structural passes.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
source scripts/gpu_env.sh >/dev/null 2>&1
export KTX_CACHE_DIR="$OUT/cache" PYTHONUNBUFFERED=1
for ks in silu_and_mul:tokens=1,d=4096 silu_and_mul:tokens=64,d=14336 silu_and_mul:tokens=1024,d=11008 \
          silu_and_mul:tokens=4096,d=14336 fused_add_rmsnorm:tokens=64,d=4096 fused_add_rmsnorm:tokens=1024,d=8192 \
          fused_add_rmsnorm:tokens=4096,d=8192 merge_attn_states:tokens=512,heads=32,head_dim=128 \
          merge_attn_states:tokens=1536,heads=64,head_dim=128; do
  k=${ks%%:*}; s=${ks#*:}
  timeout 60 python3 -m ktx run kernels/$k --shape "$s" --no-odd --json "$OUT/run_${k}_${s//[,=]/_}.json" >/dev/null 2>>"$OUT/run.err" || echo "run $k $s failed" >&2
done
python3 - "$OUT" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/run_*.json")):
    d = json.load(open(f))
    for m in d.get("measurements", [d])[:1]:
        s = m.get("single") or {}
        g = m.get("graph") or {}
        print(f"{m.get('kernel')} {m.get('shape')} {m.get('status')} single {s.get('median_us', 0):.2f} graph {g.get('median_us', 0):.2f}")
PY
tune() {  # kernel passes seconds
  timeout $(( $3 + 40 )) python3 -m ktx tune kernels/$1 --passes "$2" --shapes quick --trials 40 \
    --time-limit "$3" --seed 1 --out "$OUT/tune_$1" --quiet > "$OUT/tune_$1.txt" 2>&1
  echo "== tune $1 ($2) rc=$?"; tail -12 "$OUT/tune_$1.txt"
}
tune silu_and_mul 'block-size,unroll,split' 130
tune fused_add_rmsnorm 'block-size,unroll' 90
tune merge_attn_states 'block-size,coarsen' 90
