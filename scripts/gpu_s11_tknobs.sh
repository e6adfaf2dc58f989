#!/usr/bin/env bash
# Session 11, branch s11-tknobs: the three real-code kernels whose per-shape setting became a knob
# (issue 22 item 3: "a launcher heuristic that picks among instantiations by shape is what the
# dispatch table replaces"): DeepSpeed moe_gather's COPY_UNROLL, DeepSpeed pre_rms_norm's UNROLL,
# exllamav2 rms_norm's BLOCKS_PER_WARP, each 0 = the spec's (the launcher's) pick per shape.
#   1. benchmarks/realcode/run.py: `ktx bench`, then `ktx optimize --planner rules --shapes default
#      --budget 50` per kernel, one lane (results.md: ran, dispatched speedup, pipeline); it starts
#      no kernel in the last 125 s (a kernel it leaves out is listed as not run);
#      NB: the rules planner ranks expose low (rules.py), so a 50 s optimize may never search the
#      new knob: step 2 is the direct evidence;
#   2. with the time left, `ktx tune --passes expose` per kernel: every value the search draws of
#      the new knob verified against the original (tune.log lists the configs; a wrong result is
#      a failed verification, not a speedup). What to look for: 0 verification failures, and
#      whether any value beats 0 (the pick) at some shape.
#   OUT=/path bash scripts/gpu_s11_tknobs.sh [LIMIT_S=230]     (one GPU, under 4 minutes)
# Carry .whl and benchmarks/realcode/src (fetch.py writes it).
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT="${1:-230}"; START=$(date +%s)
OUT="${OUT:-$PWD/gpu_s11_tknobs_out}"; mkdir -p "$OUT/realcode"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | head -1
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
IDS=(deepspeed__moe_gather_kernel deepspeed__pre_rms_norm exllamav2__rms_norm_kernel)
WORK=/tmp/s11-tknobs-work; rm -rf "$WORK"
# the knob each spec's expose template gives (CPU, seconds): domain, default 0, constraint
for id in "${IDS[@]}"; do
  python3 - "$id" >"$OUT/knobs_$id.json" 2>&1 <<'PY'
import json, os, sys
from ktx.pipeline import template_for_spec
from ktx.specload import load_spec
os.chdir(f"benchmarks/realcode/{sys.argv[1]}")
t = template_for_spec(load_spec("ktx.toml"), "expose")
print(json.dumps({"knobs": [k.to_json() for k in t.knobs], "constraints": list(t.space.constraints),
                  "template_args": list(t.template_args)}, indent=1))
PY
done
LEFT=$(( LIMIT - ($(date +%s) - START) ))
CUDA_VISIBLE_DEVICES=0 timeout "$LEFT" python3 benchmarks/realcode/run.py --ids "${IDS[@]}" --gpus 1 \
  --budget 50 --deadline $(( LEFT - 125 > 0 ? LEFT - 125 : 1 )) --out "$OUT/realcode" --work "$WORK" \
  >"$OUT/lanes.txt" 2>&1
echo "run.py rc=$?" | tee -a "$OUT/lanes.txt"
head -30 "$OUT/realcode/results.md" 2>/dev/null
for id in "${IDS[@]}"; do
  LEFT=$(( LIMIT - ($(date +%s) - START) - 5 ))
  if [ "$LEFT" -lt 15 ]; then echo "tune $id: not run ($LEFT s left)" | tee -a "$OUT/tune.txt"; continue; fi
  T=$(( LEFT / 3 < 12 ? LEFT / 3 : 12 )); T=$(( T < 8 ? 8 : T ))
  (cd "benchmarks/realcode/$id" && CUDA_VISIBLE_DEVICES=0 timeout $(( T + 15 )) python3 -m ktx tune . \
     --passes expose --shapes default --trials 6 --time-limit "$T" --quiet --out "$WORK/tune_$id" \
     >"$OUT/tune_$id.log" 2>&1; echo "tune $id rc=$? (time limit $T s)" | tee -a "$OUT/tune.txt")
  grep -hiE "verif|dispatch|COPY_UNROLL|UNROLL|BLOCKS_PER_WARP|speedup|fail" "$OUT/tune_$id.log" | head -20
done
tar czf "$OUT/work.tar.gz" --exclude='*.o' --exclude='*.cubin' -C /tmp s11-tknobs-work 2>/dev/null
echo "elapsed $(( $(date +%s) - START )) s" | tee -a "$OUT/device.txt"
