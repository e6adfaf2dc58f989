#!/usr/bin/env bash
# s10-checkcost's GPU evidence, one GPU, under 4 minutes:
#   OUT=/path bash scripts/gpu_s10_checkcost.sh [BUDGET_S=195]
# llm.c softmax_forward from its naive kernel (40 ms a launch at C=50257), `ktx optimize` alone
# (--no-hand) at the budget the session-10 ladder run gave it (195 s). That run measured its
# originals in 41.1 s, ran ONE round (42x; its check 80.9 s of five pairs) and stopped: "39.2 s left,
# 114.1 s of it kept back". Expected now: the originals in well under 41 s (one launch a graph and
# ten single launches for a steady 40 ms kernel), each large win checked with 2 pairs (the
# paired-check reasons say "2 of 5 pairs: the first 2 already lay far above 1"), the reserve priced
# at 2 pairs, and 2 or more rounds. Carry .whl (optuna, tree-sitter, tree-sitter-cuda) and shared/llmc.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=${1:-195}
OUT="${OUT:-$PWD/gpu_s10_checkcost_out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC1091
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | head -1
  date -u +%FT%TZ; git log -1 --format='%H %s' 2>/dev/null | cut -c1-100; } | tee "$OUT/device.txt"
WORK=/tmp/s10-checkcost-work
rm -rf "$WORK"
CUDA_VISIBLE_DEVICES=0 timeout 225 python3 benchmarks/llmc/run.py --llmc shared/llmc --kernels softmax_forward \
  --no-hand --budget "$BUDGET" --work "$WORK" --out "$OUT" >"$OUT/run.log" 2>&1
echo "run.py rc=$?"
python3 - "$WORK/runs/softmax_forward/optimize.json" <<'PY' | tee "$OUT/summary.txt"
import json, sys
d = json.load(open(sys.argv[1]))
r = d.get("rounds")
print("rounds:", r if isinstance(r, int) else len(r or ()), "stop:", d.get("stop_reason"))
for n in d.get("notes") or ():
    if n.startswith(("budget", "originals", "re-check")) or "final check" in n:
        print("  note:", n[:400])
def walk(x):
    if isinstance(x, dict):
        if "status" in x and "reason" in x and "shape" in x and "interval" in x:
            iv = x.get("interval") or {}
            print("  check:", x["shape"], x["status"], "n =", iv.get("n"), "|", str(x["reason"])[:200])
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(d)
PY
grep -h "originals\|final check\|kept back" "$WORK/logs/softmax_forward.log" 2>/dev/null | cut -c1-300 | tail -20 | tee -a "$OUT/summary.txt"
tar czf "$OUT/runs.tar.gz" --exclude='*.cu' -C /tmp s10-checkcost-work 2>/dev/null
